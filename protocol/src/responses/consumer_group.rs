//! The KIP-848 consumer group responses, ConsumerGroupHeartbeat (key 68) and
//! ConsumerGroupDescribe (key 69), versions 0–1, written field by field. kafka-protocol 0.15.1
//! knows only v0 of both, and ConsumerGroupDescribe v1 adds `member_type` inside each member
//! (KIP-1099), where the crate's encoding cannot be extended ([`crate::past_crate`]); one writer
//! per message serves both versions. ConsumerGroupHeartbeat's response is the same at v0 and v1.
//! Both are checked byte for byte against Kafka 4.1.1's `ConsumerGroupHeartbeatResponseData` and
//! `ConsumerGroupDescribeResponseData` in the tests. They implement kafka-protocol's
//! `Encodable`, so the broker encodes them through the same path as every other response.
//!
//! The size is computed by writing the body (these responses are small beside a Fetch: a
//! heartbeat's assignment, or a describe of a few groups), so `compute_size` and `encode` agree
//! by construction.
//!
//! Must never: encode a version past 1 (its schema is unknown here), or write a tagged field
//! (these messages define none; Skiff's own answers carry no unknown ones).

use std::collections::BTreeMap;

use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

use crate::past_crate::{
    put_compact_array_len, put_compact_nullable_string, put_compact_string, put_tagged_fields,
};

/// Newest version of either response this module encodes.
pub const CONSUMER_GROUP_VERSION_MAX: i16 = 1;

/// First ConsumerGroupDescribe version whose members carry their type.
pub const DESCRIBE_MEMBER_TYPE_VERSION_MIN: i16 = 1;

/// Kafka's member types in ConsumerGroupDescribe v1 (`MemberType` of KIP-1099).
pub mod member_type {
    /// Not known (v0 answers, and Kafka's default).
    pub const UNKNOWN: i8 = -1;
    /// A member using the classic protocol in a consumer group (migration).
    pub const CLASSIC: i8 = 0;
    /// A member using ConsumerGroupHeartbeat.
    pub const CONSUMER: i8 = 1;
}

/// One topic's partitions of an assignment in a heartbeat response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatTopicPartitions {
    /// The topic id.
    pub topic_id: Uuid,
    /// The partitions.
    pub partitions: Vec<i32>,
}

/// A ConsumerGroupHeartbeat response, versions 0–1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupHeartbeatResponse {
    /// Throttle time in milliseconds.
    pub throttle_time_ms: i32,
    /// Error code, 0 for none.
    pub error_code: i16,
    /// The error's message, if any.
    pub error_message: Option<String>,
    /// The member id (a server-generated one on the first heartbeat), null with an error.
    pub member_id: Option<String>,
    /// The member epoch.
    pub member_epoch: i32,
    /// How often the member must heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's new assignment, or `None` when it has not changed (null on the wire).
    pub assignment: Option<Vec<HeartbeatTopicPartitions>>,
}

impl Default for ConsumerGroupHeartbeatResponse {
    /// Kafka's defaults: no error, no member, epoch 0, no assignment.
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// A nullable struct's marker byte: -1 for null, 1 for present (Kafka's generated writers).
const NULL_STRUCT: u8 = 0xff;
const PRESENT_STRUCT: u8 = 1;

impl ConsumerGroupHeartbeatResponse {
    fn encode_body(&self, version: i16) -> anyhow::Result<Vec<u8>> {
        check_version("ConsumerGroupHeartbeat", version)?;
        let mut out = Vec::new();
        out.extend_from_slice(&self.throttle_time_ms.to_be_bytes());
        out.extend_from_slice(&self.error_code.to_be_bytes());
        put_compact_nullable_string(&mut out, self.error_message.as_deref())?;
        put_compact_nullable_string(&mut out, self.member_id.as_deref())?;
        out.extend_from_slice(&self.member_epoch.to_be_bytes());
        out.extend_from_slice(&self.heartbeat_interval_ms.to_be_bytes());
        match &self.assignment {
            None => out.push(NULL_STRUCT),
            Some(topics) => {
                out.push(PRESENT_STRUCT);
                put_compact_array_len(&mut out, Some(topics.len()))?;
                for topic in topics {
                    out.extend_from_slice(topic.topic_id.as_bytes());
                    put_partitions(&mut out, &topic.partitions)?;
                    put_no_tags(&mut out)?;
                }
                put_no_tags(&mut out)?;
            }
        }
        put_no_tags(&mut out)?;
        Ok(out)
    }
}

/// One topic's partitions of an assignment in a describe response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribedTopicPartitions {
    /// The topic id.
    pub topic_id: Uuid,
    /// The topic name.
    pub topic_name: String,
    /// The partitions.
    pub partitions: Vec<i32>,
}

/// One member of a described consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// The member id.
    pub member_id: String,
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The member epoch.
    pub member_epoch: i32,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic pattern.
    pub subscribed_topic_regex: Option<String>,
    /// The partitions it owns.
    pub assignment: Vec<DescribedTopicPartitions>,
    /// Its target assignment.
    pub target_assignment: Vec<DescribedTopicPartitions>,
    /// v1+: [`member_type`].
    pub member_type: i8,
}

impl Default for DescribedMember {
    fn default() -> Self {
        Self {
            member_id: String::new(),
            instance_id: None,
            rack_id: None,
            member_epoch: 0,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            assignment: Vec::new(),
            target_assignment: Vec::new(),
            member_type: member_type::UNKNOWN,
        }
    }
}

/// One group of a describe response (an error entry keeps the defaults beside its code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// Error code, 0 for none.
    pub error_code: i16,
    /// The error's message.
    pub error_message: Option<String>,
    /// The group id.
    pub group_id: String,
    /// The state's name as Kafka spells it ("Empty", "Assigning", "Reconciling", "Stable",
    /// "Dead").
    pub group_state: String,
    /// The group epoch.
    pub group_epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// The server assignor in use.
    pub assignor_name: String,
    /// The members.
    pub members: Vec<DescribedMember>,
    /// Authorized operations as a bit field (`i32::MIN`: not asked for).
    pub authorized_operations: i32,
}

impl Default for DescribedGroup {
    /// Kafka's defaults: empty strings, epochs 0, authorized operations not given.
    fn default() -> Self {
        Self {
            error_code: 0,
            error_message: None,
            group_id: String::new(),
            group_state: String::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignor_name: String::new(),
            members: Vec::new(),
            authorized_operations: i32::MIN,
        }
    }
}

/// A ConsumerGroupDescribe response, versions 0–1.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupDescribeResponse {
    /// Throttle time in milliseconds.
    pub throttle_time_ms: i32,
    /// One entry per requested group.
    pub groups: Vec<DescribedGroup>,
}

impl ConsumerGroupDescribeResponse {
    fn encode_body(&self, version: i16) -> anyhow::Result<Vec<u8>> {
        check_version("ConsumerGroupDescribe", version)?;
        let mut out = Vec::new();
        out.extend_from_slice(&self.throttle_time_ms.to_be_bytes());
        put_compact_array_len(&mut out, Some(self.groups.len()))?;
        for group in &self.groups {
            put_described_group(&mut out, group, version)?;
        }
        put_no_tags(&mut out)?;
        Ok(out)
    }
}

fn put_described_group(
    out: &mut Vec<u8>,
    group: &DescribedGroup,
    version: i16,
) -> anyhow::Result<()> {
    out.extend_from_slice(&group.error_code.to_be_bytes());
    put_compact_nullable_string(out, group.error_message.as_deref())?;
    put_compact_string(out, &group.group_id)?;
    put_compact_string(out, &group.group_state)?;
    out.extend_from_slice(&group.group_epoch.to_be_bytes());
    out.extend_from_slice(&group.assignment_epoch.to_be_bytes());
    put_compact_string(out, &group.assignor_name)?;
    put_compact_array_len(out, Some(group.members.len()))?;
    for member in &group.members {
        put_described_member(out, member, version)?;
    }
    out.extend_from_slice(&group.authorized_operations.to_be_bytes());
    put_no_tags(out)
}

fn put_described_member(
    out: &mut Vec<u8>,
    member: &DescribedMember,
    version: i16,
) -> anyhow::Result<()> {
    put_compact_string(out, &member.member_id)?;
    put_compact_nullable_string(out, member.instance_id.as_deref())?;
    put_compact_nullable_string(out, member.rack_id.as_deref())?;
    out.extend_from_slice(&member.member_epoch.to_be_bytes());
    put_compact_string(out, &member.client_id)?;
    put_compact_string(out, &member.client_host)?;
    put_compact_array_len(out, Some(member.subscribed_topic_names.len()))?;
    for name in &member.subscribed_topic_names {
        put_compact_string(out, name)?;
    }
    put_compact_nullable_string(out, member.subscribed_topic_regex.as_deref())?;
    put_described_assignment(out, &member.assignment)?;
    put_described_assignment(out, &member.target_assignment)?;
    if version >= DESCRIBE_MEMBER_TYPE_VERSION_MIN {
        out.push(member.member_type.to_be_bytes()[0]);
    }
    put_no_tags(out)
}

/// An `Assignment` struct: its topics, then its own (empty) tagged-field section.
fn put_described_assignment(
    out: &mut Vec<u8>,
    topics: &[DescribedTopicPartitions],
) -> anyhow::Result<()> {
    put_compact_array_len(out, Some(topics.len()))?;
    for topic in topics {
        out.extend_from_slice(topic.topic_id.as_bytes());
        put_compact_string(out, &topic.topic_name)?;
        put_partitions(out, &topic.partitions)?;
        put_no_tags(out)?;
    }
    put_no_tags(out)
}

fn put_partitions(out: &mut Vec<u8>, partitions: &[i32]) -> anyhow::Result<()> {
    put_compact_array_len(out, Some(partitions.len()))?;
    for partition in partitions {
        out.extend_from_slice(&partition.to_be_bytes());
    }
    Ok(())
}

fn put_no_tags(out: &mut Vec<u8>) -> anyhow::Result<()> {
    put_tagged_fields(out, &BTreeMap::new())
}

fn check_version(api: &str, version: i16) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0..=CONSUMER_GROUP_VERSION_MAX).contains(&version),
        "{api} response v{version} is not encoded"
    );
    Ok(())
}

macro_rules! encodable_by_body {
    ($ty:ty) => {
        impl Encodable for $ty {
            fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
                buf.put_slice(&self.encode_body(version)?);
                Ok(())
            }

            fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
                Ok(self.encode_body(version)?.len())
            }
        }
    };
}

encodable_by_body!(ConsumerGroupHeartbeatResponse);
encodable_by_body!(ConsumerGroupDescribeResponse);

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn encoded<M: Encodable>(message: &M, version: i16) -> Vec<u8> {
        let mut out = Vec::new();
        message.encode(&mut out, version).unwrap();
        assert_eq!(out.len(), message.compute_size(version).unwrap());
        out
    }

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    /// Bytes written by Kafka 4.1.1's `ConsumerGroupHeartbeatResponseData` (kafka-clients-4.1.1.jar,
    /// `MessageUtil.toByteBufferAccessor(data, version)`) for the same fields; v0 and v1 are equal.
    #[test]
    fn heartbeat_responses_are_kafkas_bytes() {
        let ok = ConsumerGroupHeartbeatResponse {
            member_id: Some("mem-1".into()),
            member_epoch: 4,
            heartbeat_interval_ms: 5000,
            assignment: Some(vec![
                HeartbeatTopicPartitions {
                    topic_id: t(1),
                    partitions: vec![0, 2],
                },
                HeartbeatTopicPartitions {
                    topic_id: t(2),
                    partitions: vec![1],
                },
            ]),
            ..Default::default()
        };
        let unchanged = ConsumerGroupHeartbeatResponse {
            assignment: None,
            ..ok.clone()
        };
        let fenced = ConsumerGroupHeartbeatResponse {
            throttle_time_ms: 7,
            error_code: 110,
            error_message: Some("fenced".into()),
            member_id: None,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        for version in 0..=1 {
            assert_eq!(
                encoded(&ok, version),
                hex("00000000000000066d656d2d31000000040000138801030101010101010101010101010101010103\
                     000000000000000200020202020202020202020202020202020200000001000000"),
            );
            assert_eq!(
                encoded(&unchanged, version),
                hex("00000000000000066d656d2d310000000400001388ff00")
            );
            assert_eq!(
                encoded(&fenced, version),
                hex("00000007006e0766656e63656400ffffffff00000000ff00")
            );
        }
        assert!(ok.compute_size(2).is_err());
    }

    fn described() -> ConsumerGroupDescribeResponse {
        let topic = |partitions: Vec<i32>| DescribedTopicPartitions {
            topic_id: t(1),
            topic_name: "t".into(),
            partitions,
        };
        let member = DescribedMember {
            member_id: "mem-1".into(),
            instance_id: None,
            rack_id: Some("r1".into()),
            member_epoch: 7,
            client_id: "cli".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            assignment: vec![topic(vec![0, 1])],
            target_assignment: vec![topic(vec![0, 1, 2])],
            member_type: member_type::CONSUMER,
        };
        ConsumerGroupDescribeResponse {
            throttle_time_ms: 3,
            groups: vec![
                DescribedGroup {
                    group_id: "grp".into(),
                    group_state: "Stable".into(),
                    group_epoch: 7,
                    assignment_epoch: 7,
                    assignor_name: "uniform".into(),
                    members: vec![member],
                    ..Default::default()
                },
                DescribedGroup {
                    error_code: 69,
                    error_message: Some("Group g2 not found.".into()),
                    group_id: "g2".into(),
                    group_state: "Dead".into(),
                    ..Default::default()
                },
            ],
        }
    }

    /// Kafka 4.1.1's `ConsumerGroupDescribeResponseData` bytes: a stable group with one member
    /// and a group not found. v1 adds the member's type (1 = consumer) before its tagged fields.
    #[test]
    fn describe_responses_are_kafkas_bytes() {
        assert_eq!(
            encoded(&described(), 0),
            hex(
                "00000003030000000467727007537461626c65000000070000000708756e69666f726d02066d656d\
                 2d31000372310000000704636c690b2f3132372e302e302e31020274000201010101010101010101\
                 01010101010102740300000000000000010000020101010101010101010101010101010102740400\
                 0000000000000100000002000000800000000000451447726f7570206732206e6f7420666f756e64\
                 2e036732054465616400000000000000000101800000000000"
            )
        );
        assert_eq!(
            encoded(&described(), 1),
            hex(
                "00000003030000000467727007537461626c65000000070000000708756e69666f726d02066d656d\
                 2d31000372310000000704636c690b2f3132372e302e302e31020274000201010101010101010101\
                 01010101010102740300000000000000010000020101010101010101010101010101010102740400\
                 000000000000010000000200000100800000000000451447726f7570206732206e6f7420666f756e\
                 642e036732054465616400000000000000000101800000000000"
            )
        );
        assert!(described().compute_size(2).is_err());
    }
}
