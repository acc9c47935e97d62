//! The consumer group records Kafka 4.1.1 writes to `__consumer_offsets`, byte for byte, and
//! their decoding. A key is `i16 record type` then the key's fields in the non-flexible layout
//! (i16-length strings); a value is `i16 version = 0` then the flexible layout (compact strings
//! and arrays, 16-byte uuids, a tagged-field section after each struct). A null value is a
//! tombstone. The record types (Kafka's `apiKey`s):
//!
//! | type | record                              | key                  | value (v0)                       |
//! |------|-------------------------------------|----------------------|----------------------------------|
//! | 3    | ConsumerGroupMetadata               | group                | epoch, tag 0: metadata hash      |
//! | 4    | ConsumerGroupPartitionMetadata      | group                | topics (read, no longer written) |
//! | 5    | ConsumerGroupMemberMetadata         | group, member        | instance, rack, client, subscription, rebalance timeout, assignor |
//! | 6    | ConsumerGroupTargetAssignmentMetadata | group              | assignment epoch                 |
//! | 7    | ConsumerGroupTargetAssignmentMember | group, member        | partitions                       |
//! | 8    | ConsumerGroupCurrentMemberAssignment | group, member       | epochs, state, assigned, pending revocation |
//! | 16   | ConsumerGroupRegularExpression      | group, regex         | topics, version, timestamp       |
//!
//! A member's classic-protocol metadata (tag 0 of type 5: its session timeout and the protocols
//! of its JoinGroup, written for the classic members of a consumer group) is read and written;
//! other tagged fields (later Kafka versions' additions) are skipped on read and not written.
//!
//! Must never: allocate for a count before checking it against the bytes that remain and
//! [`RECORD_ELEMENTS_MAX`], or accept trailing bytes.

use std::collections::{BTreeMap, BTreeSet};

use skiff_protocol::codec::{capacity_for, put_unsigned_varint, Reader};
use skiff_protocol::DecodeError;

use super::reconcile::{MemberAssignment, MemberState};
use super::{Assignment, TopicId};

/// Elements one array of one record may hold (topics, partitions, names). A group's assignment of
/// a million partitions fits; anything larger is a damaged record.
pub const RECORD_ELEMENTS_MAX: usize = 1 << 20;
/// Tagged fields one struct may carry.
const TAGGED_FIELDS_MAX: usize = 64;

/// Record types (the key's leading version), as Kafka numbers them.
pub mod record_type {
    /// ConsumerGroupMetadata.
    pub const GROUP_METADATA: i16 = 3;
    /// ConsumerGroupPartitionMetadata (read; Kafka 4.1 writes the metadata hash instead).
    pub const PARTITION_METADATA: i16 = 4;
    /// ConsumerGroupMemberMetadata.
    pub const MEMBER_METADATA: i16 = 5;
    /// ConsumerGroupTargetAssignmentMetadata.
    pub const TARGET_ASSIGNMENT_METADATA: i16 = 6;
    /// ConsumerGroupTargetAssignmentMember.
    pub const TARGET_ASSIGNMENT_MEMBER: i16 = 7;
    /// ConsumerGroupCurrentMemberAssignment.
    pub const CURRENT_MEMBER_ASSIGNMENT: i16 = 8;
    /// ConsumerGroupRegularExpression.
    pub const REGULAR_EXPRESSION: i16 = 16;
}

/// Whether a key version is a consumer group record type.
pub fn is_consumer_record_type(version: i16) -> bool {
    matches!(version, 3..=8 | 16)
}

/// The value version every consumer group record has.
pub const VALUE_VERSION: i16 = 0;

/// Why a consumer group record could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerRecordError {
    /// Truncated or malformed bytes.
    #[error("consumer group record: {0}")]
    Decode(#[from] DecodeError),
    /// A key whose type is not a consumer group record.
    #[error("record type {record_type} is not a consumer group record")]
    UnknownRecordType {
        /// The type found.
        record_type: i16,
    },
    /// A value version other than 0.
    #[error("consumer group record type {record_type} has unknown value version {version}")]
    UnknownValueVersion {
        /// The record type.
        record_type: i16,
        /// The version found.
        version: i16,
    },
    /// A string longer than its length prefix can say, or an array longer than
    /// [`RECORD_ELEMENTS_MAX`].
    #[error("consumer group record field of {len} is too long")]
    TooLong {
        /// Its length.
        len: usize,
    },
}

/// ConsumerGroupMetadata's value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupMetadataValue {
    /// The group epoch.
    pub epoch: i32,
    /// The hash of the subscribed topics' metadata (Kafka 4.1's tag 0; Skiff's own hash).
    pub metadata_hash: i64,
}

/// One topic of ConsumerGroupPartitionMetadata (its per-partition racks are skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadataTopic {
    /// The topic id.
    pub topic_id: TopicId,
    /// The topic name.
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
}

/// ConsumerGroupMemberMetadata's value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic pattern.
    pub subscribed_topic_regex: Option<String>,
    /// The rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The server assignor it asked for.
    pub server_assignor: Option<String>,
    /// Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat).
    pub classic: Option<ClassicMemberMetadata>,
}

/// A classic member's JoinGroup facts inside a consumer group (Kafka's `ClassicMemberMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    /// The session timeout of its JoinGroup (its session, not the group's).
    pub session_timeout_ms: i32,
    /// The protocols of its JoinGroup, in its order: (name, ConsumerProtocol subscription).
    pub supported_protocols: Vec<(String, Vec<u8>)>,
}

/// ConsumerGroupRegularExpression's value: what a pattern resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegexValue {
    /// The matching topic names.
    pub topics: Vec<String>,
    /// The topic table version it was resolved against.
    pub version: i64,
    /// When (ms since the epoch).
    pub timestamp_ms: i64,
}

/// One consumer group record; `value: None` is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// The group epoch.
    GroupMetadata {
        /// The group.
        group: String,
        /// The value.
        value: Option<GroupMetadataValue>,
    },
    /// The subscribed topics' metadata (Kafka before 4.1).
    PartitionMetadata {
        /// The group.
        group: String,
        /// The value.
        value: Option<Vec<PartitionMetadataTopic>>,
    },
    /// A member's subscription and client facts.
    MemberMetadata {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// The value.
        value: Option<MemberMetadataValue>,
    },
    /// The target assignment's epoch.
    TargetAssignmentMetadata {
        /// The group.
        group: String,
        /// The assignment epoch.
        value: Option<i32>,
    },
    /// One member's target assignment.
    TargetAssignmentMember {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// The partitions.
        value: Option<Assignment>,
    },
    /// One member's current assignment.
    CurrentMemberAssignment {
        /// The group.
        group: String,
        /// The member.
        member: String,
        /// The value.
        value: Option<MemberAssignment>,
    },
    /// What one pattern resolved to.
    RegularExpression {
        /// The group.
        group: String,
        /// The pattern.
        regex: String,
        /// The value.
        value: Option<RegexValue>,
    },
}

impl ConsumerRecord {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            Self::GroupMetadata { group, .. }
            | Self::PartitionMetadata { group, .. }
            | Self::MemberMetadata { group, .. }
            | Self::TargetAssignmentMetadata { group, .. }
            | Self::TargetAssignmentMember { group, .. }
            | Self::CurrentMemberAssignment { group, .. }
            | Self::RegularExpression { group, .. } => group,
        }
    }

    /// Whether the record is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        match self {
            Self::GroupMetadata { value, .. } => value.is_none(),
            Self::PartitionMetadata { value, .. } => value.is_none(),
            Self::MemberMetadata { value, .. } => value.is_none(),
            Self::TargetAssignmentMetadata { value, .. } => value.is_none(),
            Self::TargetAssignmentMember { value, .. } => value.is_none(),
            Self::CurrentMemberAssignment { value, .. } => value.is_none(),
            Self::RegularExpression { value, .. } => value.is_none(),
        }
    }

    /// Key bytes and value bytes (`None` for a tombstone).
    pub fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), ConsumerRecordError> {
        let key = self.encode_key()?;
        let value = if self.is_tombstone() {
            None
        } else {
            let mut out = VALUE_VERSION.to_be_bytes().to_vec();
            self.encode_value(&mut out)?;
            Some(out)
        };
        Ok((key, value))
    }

    fn encode_key(&self) -> Result<Vec<u8>, ConsumerRecordError> {
        use record_type::*;
        let (kind, second) = match self {
            Self::GroupMetadata { .. } => (GROUP_METADATA, None),
            Self::PartitionMetadata { .. } => (PARTITION_METADATA, None),
            Self::MemberMetadata { member, .. } => (MEMBER_METADATA, Some(member)),
            Self::TargetAssignmentMetadata { .. } => (TARGET_ASSIGNMENT_METADATA, None),
            Self::TargetAssignmentMember { member, .. } => (TARGET_ASSIGNMENT_MEMBER, Some(member)),
            Self::CurrentMemberAssignment { member, .. } => {
                (CURRENT_MEMBER_ASSIGNMENT, Some(member))
            }
            Self::RegularExpression { regex, .. } => (REGULAR_EXPRESSION, Some(regex)),
        };
        let mut out = kind.to_be_bytes().to_vec();
        put_key_string(&mut out, self.group())?;
        if let Some(second) = second {
            put_key_string(&mut out, second)?;
        }
        Ok(out)
    }

    fn encode_value(&self, out: &mut Vec<u8>) -> Result<(), ConsumerRecordError> {
        match self {
            Self::GroupMetadata { value: Some(v), .. } => {
                out.extend_from_slice(&v.epoch.to_be_bytes());
                if v.metadata_hash == 0 {
                    put_unsigned_varint(out, 0);
                } else {
                    // One tagged field: tag 0, 8 bytes.
                    out.extend_from_slice(&[1, 0, 8]);
                    out.extend_from_slice(&v.metadata_hash.to_be_bytes());
                }
            }
            Self::PartitionMetadata {
                value: Some(topics),
                ..
            } => {
                put_len(out, topics.len())?;
                for topic in topics {
                    out.extend_from_slice(&topic.topic_id.0);
                    put_compact_string(out, &topic.name)?;
                    out.extend_from_slice(&topic.partitions.to_be_bytes());
                    put_len(out, 0)?;
                    put_unsigned_varint(out, 0);
                }
                put_unsigned_varint(out, 0);
            }
            Self::MemberMetadata { value: Some(v), .. } => encode_member_metadata(out, v)?,
            Self::TargetAssignmentMetadata {
                value: Some(epoch), ..
            } => {
                out.extend_from_slice(&epoch.to_be_bytes());
                put_unsigned_varint(out, 0);
            }
            Self::TargetAssignmentMember {
                value: Some(assignment),
                ..
            } => {
                put_assignment(out, assignment)?;
                put_unsigned_varint(out, 0);
            }
            Self::CurrentMemberAssignment { value: Some(v), .. } => {
                out.extend_from_slice(&v.member_epoch.to_be_bytes());
                out.extend_from_slice(&v.previous_member_epoch.to_be_bytes());
                out.extend_from_slice(&v.state.value().to_be_bytes());
                put_assignment(out, &v.assigned)?;
                put_assignment(out, &v.pending_revocation)?;
                put_unsigned_varint(out, 0);
            }
            Self::RegularExpression { value: Some(v), .. } => {
                put_len(out, v.topics.len())?;
                for topic in &v.topics {
                    put_compact_string(out, topic)?;
                }
                out.extend_from_slice(&v.version.to_be_bytes());
                out.extend_from_slice(&v.timestamp_ms.to_be_bytes());
                put_unsigned_varint(out, 0);
            }
            _ => {}
        }
        Ok(())
    }

    /// Decodes a record from its key and value bytes (`None`: a tombstone).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, ConsumerRecordError> {
        let mut reader = Reader::new(key);
        let kind = reader.i16()?;
        if !is_consumer_record_type(kind) {
            return Err(ConsumerRecordError::UnknownRecordType { record_type: kind });
        }
        let group = reader.string()?.to_owned();
        let second = match kind {
            3 | 4 | 6 => None,
            _ => Some(reader.string()?.to_owned()),
        };
        reader.expect_end()?;
        let Some(value) = value else {
            return Ok(tombstone(kind, group, second.unwrap_or_default()));
        };
        let mut reader = Reader::new(value);
        let version = reader.i16()?;
        if version != VALUE_VERSION {
            return Err(ConsumerRecordError::UnknownValueVersion {
                record_type: kind,
                version,
            });
        }
        let record = decode_value(kind, group, second.unwrap_or_default(), &mut reader)?;
        reader.expect_end()?;
        Ok(record)
    }
}

fn tombstone(kind: i16, group: String, second: String) -> ConsumerRecord {
    use ConsumerRecord::*;
    match kind {
        3 => GroupMetadata { group, value: None },
        4 => PartitionMetadata { group, value: None },
        5 => MemberMetadata {
            group,
            member: second,
            value: None,
        },
        6 => TargetAssignmentMetadata { group, value: None },
        7 => TargetAssignmentMember {
            group,
            member: second,
            value: None,
        },
        8 => CurrentMemberAssignment {
            group,
            member: second,
            value: None,
        },
        _ => RegularExpression {
            group,
            regex: second,
            value: None,
        },
    }
}

fn decode_value(
    kind: i16,
    group: String,
    second: String,
    reader: &mut Reader<'_>,
) -> Result<ConsumerRecord, ConsumerRecordError> {
    use ConsumerRecord::*;
    Ok(match kind {
        3 => GroupMetadata {
            group,
            value: Some(decode_group_metadata(reader)?),
        },
        4 => PartitionMetadata {
            group,
            value: Some(decode_partition_metadata(reader)?),
        },
        5 => MemberMetadata {
            group,
            member: second,
            value: Some(decode_member_metadata(reader)?),
        },
        6 => {
            let epoch = reader.i32()?;
            skip_tags(reader)?;
            TargetAssignmentMetadata {
                group,
                value: Some(epoch),
            }
        }
        7 => {
            let assignment = read_assignment(reader)?;
            skip_tags(reader)?;
            TargetAssignmentMember {
                group,
                member: second,
                value: Some(assignment),
            }
        }
        8 => CurrentMemberAssignment {
            group,
            member: second,
            value: Some(decode_current_assignment(reader)?),
        },
        _ => {
            let topics = read_strings(reader)?;
            let version = reader.i64()?;
            let timestamp_ms = reader.i64()?;
            skip_tags(reader)?;
            let value = RegexValue {
                topics,
                version,
                timestamp_ms,
            };
            RegularExpression {
                group,
                regex: second,
                value: Some(value),
            }
        }
    })
}

fn decode_group_metadata(
    reader: &mut Reader<'_>,
) -> Result<GroupMetadataValue, ConsumerRecordError> {
    let epoch = reader.i32()?;
    let mut metadata_hash = 0;
    reader.tagged_fields(TAGGED_FIELDS_MAX, |tag, data| {
        if tag == 0 {
            let mut field = Reader::new(data);
            metadata_hash = field.i64()?;
            field.expect_end()?;
        }
        Ok(())
    })?;
    Ok(GroupMetadataValue {
        epoch,
        metadata_hash,
    })
}

fn decode_current_assignment(
    reader: &mut Reader<'_>,
) -> Result<MemberAssignment, ConsumerRecordError> {
    let member_epoch = reader.i32()?;
    let previous_member_epoch = reader.i32()?;
    let state = MemberState::from_value(reader.i8()?);
    let assigned = read_assignment(reader)?;
    let pending_revocation = read_assignment(reader)?;
    skip_tags(reader)?;
    Ok(MemberAssignment {
        state,
        member_epoch,
        previous_member_epoch,
        assigned,
        pending_revocation,
    })
}

fn encode_member_metadata(
    out: &mut Vec<u8>,
    v: &MemberMetadataValue,
) -> Result<(), ConsumerRecordError> {
    put_compact_nullable_string(out, v.instance_id.as_deref())?;
    put_compact_nullable_string(out, v.rack_id.as_deref())?;
    put_compact_string(out, &v.client_id)?;
    put_compact_string(out, &v.client_host)?;
    put_len(out, v.subscribed_topic_names.len())?;
    for name in &v.subscribed_topic_names {
        put_compact_string(out, name)?;
    }
    put_compact_nullable_string(out, v.subscribed_topic_regex.as_deref())?;
    out.extend_from_slice(&v.rebalance_timeout_ms.to_be_bytes());
    put_compact_nullable_string(out, v.server_assignor.as_deref())?;
    match &v.classic {
        None => put_unsigned_varint(out, 0),
        Some(classic) => {
            // A nullable struct: a presence byte (1) before it.
            let mut field = vec![1];
            encode_classic_metadata(&mut field, classic)?;
            put_unsigned_varint(out, 1);
            put_unsigned_varint(out, 0);
            put_len_raw(out, field.len())?;
            out.extend_from_slice(&field);
        }
    }
    Ok(())
}

fn encode_classic_metadata(
    out: &mut Vec<u8>,
    classic: &ClassicMemberMetadata,
) -> Result<(), ConsumerRecordError> {
    out.extend_from_slice(&classic.session_timeout_ms.to_be_bytes());
    put_len(out, classic.supported_protocols.len())?;
    for (name, metadata) in &classic.supported_protocols {
        put_compact_string(out, name)?;
        put_len(out, metadata.len())?;
        out.extend_from_slice(metadata);
        put_unsigned_varint(out, 0);
    }
    put_unsigned_varint(out, 0);
    Ok(())
}

/// The tagged field's nullable struct: a presence byte (negative: null), then the struct.
fn decode_classic_metadata(data: &[u8]) -> Result<Option<ClassicMemberMetadata>, DecodeError> {
    let mut reader = Reader::new(data);
    if reader.i8()? < 0 {
        reader.expect_end()?;
        return Ok(None);
    }
    let session_timeout_ms = reader.i32()?;
    // Each protocol takes at least a name length, a metadata length and its tag count.
    let count = reader
        .compact_array_len(3, RECORD_ELEMENTS_MAX)?
        .unwrap_or(0);
    let mut supported_protocols = Vec::with_capacity(count.min(reader.remaining()));
    for _ in 0..count {
        let name = reader.compact_string()?.to_owned();
        let metadata = reader
            .compact_nullable_bytes()?
            .unwrap_or_default()
            .to_vec();
        reader.tagged_fields(TAGGED_FIELDS_MAX, |_, _| Ok(()))?;
        supported_protocols.push((name, metadata));
    }
    reader.tagged_fields(TAGGED_FIELDS_MAX, |_, _| Ok(()))?;
    reader.expect_end()?;
    Ok(Some(ClassicMemberMetadata {
        session_timeout_ms,
        supported_protocols,
    }))
}

fn decode_member_metadata(
    reader: &mut Reader<'_>,
) -> Result<MemberMetadataValue, ConsumerRecordError> {
    let instance_id = reader.compact_nullable_string()?.map(str::to_owned);
    let rack_id = reader.compact_nullable_string()?.map(str::to_owned);
    let client_id = reader.compact_string()?.to_owned();
    let client_host = reader.compact_string()?.to_owned();
    let subscribed_topic_names = read_strings(reader)?;
    let subscribed_topic_regex = reader.compact_nullable_string()?.map(str::to_owned);
    let rebalance_timeout_ms = reader.i32()?;
    let server_assignor = reader.compact_nullable_string()?.map(str::to_owned);
    let mut classic = None;
    reader.tagged_fields(TAGGED_FIELDS_MAX, |tag, data| {
        if tag == 0 {
            classic = decode_classic_metadata(data)?;
        }
        Ok(())
    })?;
    Ok(MemberMetadataValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

fn decode_partition_metadata(
    reader: &mut Reader<'_>,
) -> Result<Vec<PartitionMetadataTopic>, ConsumerRecordError> {
    let count = required_len(reader, 16 + 1 + 4 + 1 + 1)?;
    let mut topics = Vec::with_capacity(capacity_for(
        count,
        reader.remaining(),
        23,
        RECORD_ELEMENTS_MAX,
    )?);
    for _ in 0..count {
        let topic_id = read_uuid(reader)?;
        let name = reader.compact_string()?.to_owned();
        let partitions = reader.i32()?;
        let racks = required_len(reader, 4 + 1 + 1)?;
        for _ in 0..racks {
            reader.i32()?;
            read_strings(reader)?;
            skip_tags(reader)?;
        }
        skip_tags(reader)?;
        topics.push(PartitionMetadataTopic {
            topic_id,
            name,
            partitions,
        });
    }
    skip_tags(reader)?;
    Ok(topics)
}

fn put_key_string(out: &mut Vec<u8>, text: &str) -> Result<(), ConsumerRecordError> {
    let len =
        i16::try_from(text.len()).map_err(|_| ConsumerRecordError::TooLong { len: text.len() })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// A tagged field's size (an unsigned varint, not +1).
fn put_len_raw(out: &mut Vec<u8>, len: usize) -> Result<(), ConsumerRecordError> {
    let len = u32::try_from(len).map_err(|_| ConsumerRecordError::TooLong { len })?;
    put_unsigned_varint(out, len);
    Ok(())
}

/// A compact array or string length (+1, 0 meaning null).
fn put_len(out: &mut Vec<u8>, len: usize) -> Result<(), ConsumerRecordError> {
    let plus_one = u32::try_from(len)
        .ok()
        .filter(|_| len <= RECORD_ELEMENTS_MAX)
        .and_then(|len| len.checked_add(1))
        .ok_or(ConsumerRecordError::TooLong { len })?;
    put_unsigned_varint(out, plus_one);
    Ok(())
}

fn put_compact_string(out: &mut Vec<u8>, text: &str) -> Result<(), ConsumerRecordError> {
    if text.len() > i16::MAX as usize {
        return Err(ConsumerRecordError::TooLong { len: text.len() });
    }
    put_len(out, text.len())?;
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn put_compact_nullable_string(
    out: &mut Vec<u8>,
    text: Option<&str>,
) -> Result<(), ConsumerRecordError> {
    match text {
        Some(text) => put_compact_string(out, text),
        None => {
            put_unsigned_varint(out, 0);
            Ok(())
        }
    }
}

fn put_assignment(out: &mut Vec<u8>, assignment: &Assignment) -> Result<(), ConsumerRecordError> {
    let topics: Vec<_> = assignment.iter().filter(|(_, p)| !p.is_empty()).collect();
    put_len(out, topics.len())?;
    for (topic, partitions) in topics {
        out.extend_from_slice(&topic.0);
        put_len(out, partitions.len())?;
        for partition in partitions {
            out.extend_from_slice(&partition.to_be_bytes());
        }
        put_unsigned_varint(out, 0);
    }
    Ok(())
}

fn required_len(
    reader: &mut Reader<'_>,
    element_bytes_min: usize,
) -> Result<usize, ConsumerRecordError> {
    reader
        .compact_array_len(element_bytes_min, RECORD_ELEMENTS_MAX)?
        .ok_or(ConsumerRecordError::Decode(DecodeError::NegativeLength {
            length: -1,
        }))
}

fn read_uuid(reader: &mut Reader<'_>) -> Result<TopicId, ConsumerRecordError> {
    let mut id = [0u8; 16];
    id.copy_from_slice(reader.take(16)?);
    Ok(TopicId(id))
}

fn read_strings(reader: &mut Reader<'_>) -> Result<Vec<String>, ConsumerRecordError> {
    let count = required_len(reader, 1)?;
    let mut out = Vec::with_capacity(capacity_for(
        count,
        reader.remaining(),
        1,
        RECORD_ELEMENTS_MAX,
    )?);
    for _ in 0..count {
        out.push(reader.compact_string()?.to_owned());
    }
    Ok(out)
}

fn read_assignment(reader: &mut Reader<'_>) -> Result<Assignment, ConsumerRecordError> {
    let count = required_len(reader, 16 + 1 + 1)?;
    let mut assignment = BTreeMap::new();
    for _ in 0..count {
        let topic = read_uuid(reader)?;
        let partitions = required_len(reader, 4)?;
        let mut set = BTreeSet::new();
        for _ in 0..partitions {
            set.insert(reader.i32()?);
        }
        skip_tags(reader)?;
        if !set.is_empty() {
            assignment
                .entry(topic)
                .or_insert_with(BTreeSet::new)
                .extend(set);
        }
    }
    Ok(assignment)
}

fn skip_tags(reader: &mut Reader<'_>) -> Result<(), ConsumerRecordError> {
    reader.tagged_fields(TAGGED_FIELDS_MAX, |_, _| Ok(()))?;
    Ok(())
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
