//! The KIP-848 consumer group requests: ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe
//! (key 69), versions 0–1 (Kafka 4.1.1's stable range; both flexible from 0).
//!
//! ConsumerGroupHeartbeat v1 adds `subscribed_topic_regex` between `subscribed_topic_names` and
//! `server_assignor`; kafka-protocol 0.15.1 knows only v0, and a field in the middle cannot be
//! appended to the crate's encoding ([`crate::past_crate`]), so the request is
//! [`ConsumerGroupHeartbeatRequest`]: the crate's message and the pattern, encoded field by field
//! (the client side, for tests; checked against Kafka 4.1.1's bytes). ConsumerGroupDescribe v1
//! only adds a response field: its request is v0's bytes, the crate's type.
//!
//! Must never: accept a pattern at v0 (Kafka's v0 schema has no such field).

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ConsumerGroupDescribeRequest, GroupId, TopicName};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use super::source::{array, nullable_array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{GROUPS_PER_REQUEST_MAX, PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};
use crate::past_crate::{
    put_compact_array_len, put_compact_nullable_string, put_compact_string, put_tagged_fields,
};

/// First ConsumerGroupHeartbeat version with `subscribed_topic_regex`.
pub const HEARTBEAT_REGEX_VERSION_MIN: i16 = 1;

/// Newest ConsumerGroupHeartbeat version the encoder writes.
const HEARTBEAT_VERSION_MAX: i16 = 1;

/// Fewest bytes of one topic entry: a 16-byte id, the partition array's count, the tag count.
const TOPIC_PARTITIONS_BYTES_MIN: usize = 16 + 1 + 1;

/// A ConsumerGroupHeartbeat request at version 0 or 1: kafka-protocol's message (every v0 field)
/// and v1's topic pattern, `None` at v0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerGroupHeartbeatRequest {
    /// The fields of version 0.
    pub base: kafka_protocol::messages::ConsumerGroupHeartbeatRequest,
    /// v1+: the subscribed topic pattern (RE2/J syntax), null if unchanged or not used.
    pub subscribed_topic_regex: Option<kafka_protocol::protocol::StrBytes>,
}

impl ConsumerGroupHeartbeatRequest {
    fn encode_body(&self, version: i16) -> anyhow::Result<Vec<u8>> {
        anyhow::ensure!(
            (0..=HEARTBEAT_VERSION_MAX).contains(&version),
            "ConsumerGroupHeartbeat v{version} is not encoded"
        );
        anyhow::ensure!(
            version >= HEARTBEAT_REGEX_VERSION_MIN || self.subscribed_topic_regex.is_none(),
            "ConsumerGroupHeartbeat v{version} has no subscribed_topic_regex"
        );
        let m = &self.base;
        let mut out = Vec::new();
        put_compact_string(&mut out, &m.group_id)?;
        put_compact_string(&mut out, &m.member_id)?;
        out.extend_from_slice(&m.member_epoch.to_be_bytes());
        put_compact_nullable_string(&mut out, m.instance_id.as_deref())?;
        put_compact_nullable_string(&mut out, m.rack_id.as_deref())?;
        out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
        let names = m.subscribed_topic_names.as_ref();
        put_compact_array_len(&mut out, names.map(Vec::len))?;
        for name in names.into_iter().flatten() {
            put_compact_string(&mut out, name)?;
        }
        if version >= HEARTBEAT_REGEX_VERSION_MIN {
            put_compact_nullable_string(&mut out, self.subscribed_topic_regex.as_deref())?;
        }
        put_compact_nullable_string(&mut out, m.server_assignor.as_deref())?;
        let topics = m.topic_partitions.as_ref();
        put_compact_array_len(&mut out, topics.map(Vec::len))?;
        for topic in topics.into_iter().flatten() {
            out.extend_from_slice(topic.topic_id.as_bytes());
            put_compact_array_len(&mut out, Some(topic.partitions.len()))?;
            for partition in &topic.partitions {
                out.extend_from_slice(&partition.to_be_bytes());
            }
            put_tagged_fields(&mut out, &topic.unknown_tagged_fields)?;
        }
        put_tagged_fields(&mut out, &m.unknown_tagged_fields)?;
        Ok(out)
    }
}

impl Encodable for ConsumerGroupHeartbeatRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        buf.put_slice(&self.encode_body(version)?);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        Ok(self.encode_body(version)?.len())
    }
}

pub(crate) fn decode_heartbeat<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ConsumerGroupHeartbeatRequest, DecodeError> {
    let c = flexible(ApiKey::ConsumerGroupHeartbeat, version);
    let mut request = ConsumerGroupHeartbeatRequest::default();
    let m = &mut request.base;
    m.group_id = GroupId(s.string(c)?);
    m.member_id = s.string(c)?;
    m.member_epoch = s.i32()?;
    m.instance_id = s.nullable_string(c)?;
    m.rack_id = s.nullable_string(c)?;
    m.rebalance_timeout_ms = s.i32()?;
    m.subscribed_topic_names =
        nullable_array(s, c, string_bytes_min(c), TOPICS_PER_REQUEST_MAX, |s| {
            Ok(TopicName(s.string(c)?))
        })?;
    if version >= HEARTBEAT_REGEX_VERSION_MIN {
        request.subscribed_topic_regex = s.nullable_string(c)?;
    }
    let m = &mut request.base;
    m.server_assignor = s.nullable_string(c)?;
    m.topic_partitions = nullable_array(
        s,
        c,
        TOPIC_PARTITIONS_BYTES_MIN,
        TOPICS_PER_REQUEST_MAX,
        |s| {
            let topic_id = s.uuid()?;
            let partitions = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
            Ok(TopicPartitions::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
                .with_unknown_tagged_fields(s.unknown_tagged_fields()?))
        },
    )?;
    m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    Ok(request)
}

pub(crate) fn decode_describe<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ConsumerGroupDescribeRequest, DecodeError> {
    let c = flexible(ApiKey::ConsumerGroupDescribe, version);
    let mut m = ConsumerGroupDescribeRequest::default();
    m.group_ids = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
        Ok(GroupId(s.string(c)?))
    })?;
    m.include_authorized_operations = s.bool()?;
    m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    use super::*;
    use crate::requests::{decode_body, Request};

    fn hex(text: &str) -> Bytes {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
            .into()
    }

    fn s(text: &'static str) -> StrBytes {
        StrBytes::from_static_str(text)
    }

    fn join() -> ConsumerGroupHeartbeatRequest {
        let mut request = ConsumerGroupHeartbeatRequest::default();
        request.base = request
            .base
            .with_group_id(GroupId(s("grp")))
            .with_member_id(s("mem-1"))
            .with_member_epoch(0)
            .with_rack_id(Some(s("r1")))
            .with_rebalance_timeout_ms(45_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("a")), TopicName(s("b"))]))
            .with_server_assignor(Some(s("uniform")))
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic_id(Uuid::from_bytes([1; 16]))
                .with_partitions(vec![0, 2])]));
        request
    }

    fn beat() -> ConsumerGroupHeartbeatRequest {
        let mut request = ConsumerGroupHeartbeatRequest::default();
        request.base = request
            .base
            .with_group_id(GroupId(s("grp")))
            .with_member_id(s("mem-1"))
            .with_member_epoch(4)
            .with_instance_id(Some(s("inst")))
            .with_rebalance_timeout_ms(-1)
            .with_subscribed_topic_names(None)
            .with_server_assignor(None)
            .with_topic_partitions(None);
        request
    }

    /// Encodes `request` at `version`, checks the bytes, and decodes Kafka's bytes back to it.
    fn check(request: ConsumerGroupHeartbeatRequest, version: i16, kafka: &str) {
        let body = Request::ConsumerGroupHeartbeat(request.clone())
            .encode_body(version)
            .unwrap();
        assert_eq!(body.as_ref(), hex(kafka).as_ref(), "v{version}");
        let decoded = decode_body(ApiKey::ConsumerGroupHeartbeat, version, &hex(kafka));
        assert_eq!(decoded, Ok(Request::ConsumerGroupHeartbeat(request)));
    }

    /// Bytes written by Kafka 4.1.1's `ConsumerGroupHeartbeatRequestData` (kafka-clients-4.1.1.jar,
    /// `MessageUtil.toByteBufferAccessor(data, version)`) for the same fields: a join with names,
    /// a rack, an assignor and owned partitions, and a bare heartbeat of a static member.
    #[test]
    fn heartbeat_requests_are_kafkas_bytes() {
        check(
            join(),
            0,
            "04677270066d656d2d3100000000000372310000afc8030261026208756e69666f726d\
             02010101010101010101010101010101010300000000000000020000",
        );
        check(
            join(),
            1,
            "04677270066d656d2d3100000000000372310000afc803026102620008756e69666f726d\
             02010101010101010101010101010101010300000000000000020000",
        );
        check(
            beat(),
            0,
            "04677270066d656d2d310000000405696e737400ffffffff00000000",
        );
        check(
            beat(),
            1,
            "04677270066d656d2d310000000405696e737400ffffffff0000000000",
        );
        let mut regex = ConsumerGroupHeartbeatRequest::default();
        regex.base = regex
            .base
            .with_group_id(GroupId(s("grp")))
            .with_member_id(s("mem-1"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(-1)
            .with_subscribed_topic_names(None)
            .with_topic_partitions(Some(Vec::new()));
        regex.subscribed_topic_regex = Some(s("t.*"));
        check(
            regex.clone(),
            1,
            "04677270066d656d2d31000000000000ffffffff0004742e2a000100",
        );
        assert!(Request::ConsumerGroupHeartbeat(regex)
            .encode_body(0)
            .is_err());
    }

    /// Kafka 4.1.1's `ConsumerGroupDescribeRequestData` bytes (the same at v0 and v1).
    #[test]
    fn describe_requests_are_kafkas_bytes() {
        let request = ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("g1")), GroupId(s("g2"))])
            .with_include_authorized_operations(true);
        for version in 0..=1 {
            let body = Request::ConsumerGroupDescribe(request.clone())
                .encode_body(version)
                .unwrap();
            assert_eq!(body.as_ref(), hex("030367310367320100").as_ref());
            let decoded = decode_body(
                ApiKey::ConsumerGroupDescribe,
                version,
                &hex("030367310367320100"),
            );
            assert_eq!(decoded, Ok(Request::ConsumerGroupDescribe(request.clone())));
        }
    }
}
