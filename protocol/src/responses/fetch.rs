//! The Fetch response (versions 0–13) as a layout plan, not a buffer. The broker sends stored
//! batches with sendfile and down-converted data lazily, so it needs every fixed field as bytes
//! and each record set as a hole of known declared length. [`encode_fetch_response`] writes the
//! size prefix, the header and every length field from a [`FetchResponseShape`]; the parts'
//! lengths sum to the size prefix plus 4.
//!
//! The reverse, for a follower reading its leader's answer, is [`super::fetch_reader`].
//!
//! Must never: write a record-set size of −1 (an errored partition carries 0, so an old client
//! never sees a null message set), let a hole's declared length differ from what the size prefix
//! counted, or write a tagged field holding its default value.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::api::{self, ApiKey};
use crate::codec::put_unsigned_varint;
use crate::error::EncodeError;
use crate::header::put_response_header;
use crate::limits::FRAME_PREFIX_BYTES;

/// Newest Fetch response version this layout knows.
pub const FETCH_LAYOUT_VERSION_MAX: i16 = 13;

/// Everything of a Fetch response except the record bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchResponseShape {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// Top-level error (v7+).
    pub error_code: i16,
    /// Fetch session id (v7+).
    pub session_id: i32,
    /// Topics, in response order.
    pub topics: Vec<FetchTopicShape>,
}

/// One topic of a [`FetchResponseShape`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchTopicShape {
    /// Topic name (v0–12).
    pub name: String,
    /// Topic id (v13).
    pub topic_id: Uuid,
    /// Partitions, in response order.
    pub partitions: Vec<FetchPartitionShape>,
}

/// One partition of a [`FetchTopicShape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionShape {
    /// Partition index.
    pub partition_index: i32,
    /// Partition error code.
    pub error_code: i16,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset (v4+).
    pub last_stable_offset: i64,
    /// Log start offset (v5+).
    pub log_start_offset: i64,
    /// Aborted transactions (v4+), `None` = null.
    pub aborted_transactions: Option<Vec<AbortedTransactionShape>>,
    /// Preferred read replica (v11+), −1 for none.
    pub preferred_read_replica: i32,
    /// Where a follower's log diverges from the leader's (v12+, tag 0): the largest epoch the
    /// leader has at or below the follower's `last_fetched_epoch`, and that epoch's end offset
    /// (KIP-279). `None` when the fetch position is consistent.
    pub diverging_epoch: Option<DivergingEpoch>,
    /// The partition's leader as this broker knows it (v12+, tag 1), sent with
    /// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH so the fetcher need not wait for Metadata.
    pub current_leader: Option<CurrentLeader>,
    /// Declared size of the record set that the broker will write into the hole, in bytes;
    /// 0 for an errored or empty partition.
    pub records_bytes: usize,
}

impl Default for FetchPartitionShape {
    fn default() -> Self {
        Self {
            partition_index: 0,
            error_code: 0,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: None,
            preferred_read_replica: -1,
            diverging_epoch: None,
            current_leader: None,
            records_bytes: 0,
        }
    }
}

/// Tag of `DivergingEpoch` in a partition's tagged fields (v12+).
pub const DIVERGING_EPOCH_TAG: u32 = 0;
/// Tag of `CurrentLeader` in a partition's tagged fields (v12+).
pub const CURRENT_LEADER_TAG: u32 = 1;
/// Tag of `SnapshotId` in a partition's tagged fields (v12+; KRaft's metadata log only).
pub const SNAPSHOT_ID_TAG: u32 = 2;
/// First Fetch response version with the partition tagged fields above.
pub const FETCH_DIVERGING_EPOCH_VERSION_MIN: i16 = 12;

/// A partition's `DivergingEpoch` (Kafka's `EpochEndOffset`; default −1, −1 is never sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DivergingEpoch {
    /// Leader epoch.
    pub epoch: i32,
    /// The first offset after that epoch in the leader's log.
    pub end_offset: i64,
}

impl DivergingEpoch {
    /// Wire bytes of the struct: epoch, end offset, empty tagged fields.
    const BYTES: u32 = 4 + 8 + 1;
}

/// A partition's `CurrentLeader` (Kafka's `LeaderIdAndEpoch`; default −1, −1 is never sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentLeader {
    /// The leader's broker id.
    pub leader_id: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
}

impl CurrentLeader {
    /// Wire bytes of the struct: leader id, epoch, empty tagged fields.
    const BYTES: u32 = 4 + 4 + 1;
}

/// An aborted transaction of a [`FetchPartitionShape`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AbortedTransactionShape {
    /// Producer id.
    pub producer_id: i64,
    /// First offset of the aborted transaction.
    pub first_offset: i64,
}

/// One piece of an encoded Fetch response, in send order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchPart {
    /// Bytes written by this encoder (size prefix, header, fixed fields, length fields).
    Bytes(Bytes),
    /// A hole the broker fills with exactly `len` bytes of the record set of
    /// `shape.topics[topic_index].partitions[partition_index]` (emitted only when `len > 0`).
    Records {
        /// Index into [`FetchResponseShape::topics`].
        topic_index: usize,
        /// Index into [`FetchTopicShape::partitions`] (not the Kafka partition number).
        partition_index: usize,
        /// Declared record-set length in bytes.
        len: usize,
    },
}

impl FetchPart {
    /// Bytes this part puts on the wire.
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(bytes) => bytes.len(),
            Self::Records { len, .. } => *len,
        }
    }

    /// Whether the part is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds the parts while counting every byte, so the size prefix can be patched in at the end.
struct PartsWriter {
    parts: Vec<FetchPart>,
    current: BytesMut,
    total_bytes: usize,
}

impl PartsWriter {
    fn hole(&mut self, topic_index: usize, partition_index: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.flush();
        self.parts.push(FetchPart::Records {
            topic_index,
            partition_index,
            len,
        });
        self.total_bytes = self.total_bytes.saturating_add(len);
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            self.total_bytes = self.total_bytes.saturating_add(self.current.len());
            self.parts
                .push(FetchPart::Bytes(self.current.split().freeze()));
        }
    }
}

fn length_i32(what: &'static str, value: usize) -> Result<i32, EncodeError> {
    i32::try_from(value).map_err(|_| EncodeError::TooLarge {
        what,
        value: u64::try_from(value).unwrap_or(u64::MAX),
    })
}

fn put_array_len(out: &mut BytesMut, compact: bool, len: Option<usize>) -> Result<(), EncodeError> {
    match (compact, len) {
        (false, None) => out.put_i32(-1),
        (false, Some(len)) => out.put_i32(length_i32("array length", len)?),
        (true, None) => out.put_u8(0),
        (true, Some(len)) => {
            let plus_one = u32::try_from(len)
                .ok()
                .and_then(|len| len.checked_add(1))
                .ok_or(EncodeError::TooLarge {
                    what: "array length",
                    value: u64::try_from(len).unwrap_or(u64::MAX),
                })?;
            put_varint_into(out, plus_one);
        }
    }
    Ok(())
}

fn put_varint_into(out: &mut BytesMut, value: u32) {
    let mut scratch = Vec::with_capacity(5);
    put_unsigned_varint(&mut scratch, value);
    out.put_slice(&scratch);
}

fn put_string(out: &mut BytesMut, compact: bool, value: &str) -> Result<(), EncodeError> {
    if compact {
        put_array_len(out, true, Some(value.len()))?;
    } else {
        let len = i16::try_from(value.len()).map_err(|_| EncodeError::TooLarge {
            what: "topic name",
            value: u64::try_from(value.len()).unwrap_or(u64::MAX),
        })?;
        out.put_i16(len);
    }
    out.put_slice(value.as_bytes());
    Ok(())
}

/// Lays out the Fetch response of `version` (0–13) to the request `correlation_id`. The first
/// part starts with the size prefix; [`FetchPart::Records`] holes carry each partition's declared
/// `records_bytes`.
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    shape: &FetchResponseShape,
) -> Result<Vec<FetchPart>, EncodeError> {
    let row = api::supported(ApiKey::Fetch)
        .filter(|row| row.supports(version) && version <= FETCH_LAYOUT_VERSION_MAX)
        .ok_or(EncodeError::UnsupportedVersion {
            api_version: version,
        })?;
    let compact = row.is_flexible(version);
    let mut writer = PartsWriter {
        parts: Vec::new(),
        // One buffer for every header byte of the response, split into a part per record-set
        // hole: a small buffer was re-allocated every dozen partitions (each allocation with its
        // shared-count header), about 16 KiB per 250-partition legacy response kept while the
        // response is written, against the ~5 KiB written (kip283-findings.md, session 4).
        current: BytesMut::with_capacity(header_bytes_estimate(version, shape)),
        total_bytes: 0,
    };
    // Size prefix placeholder, patched once every part is counted.
    writer.current.put_i32(0);
    put_response_header(
        &mut writer.current,
        row.response_header_version(version),
        correlation_id,
    );
    if version >= 1 {
        writer.current.put_i32(shape.throttle_time_ms);
    }
    if version >= 7 {
        writer.current.put_i16(shape.error_code);
        writer.current.put_i32(shape.session_id);
    }
    put_array_len(&mut writer.current, compact, Some(shape.topics.len()))?;
    for (topic_index, topic) in shape.topics.iter().enumerate() {
        if version <= 12 {
            put_string(&mut writer.current, compact, &topic.name)?;
        } else {
            writer.current.put_slice(topic.topic_id.as_bytes());
        }
        put_array_len(&mut writer.current, compact, Some(topic.partitions.len()))?;
        for (partition_index, partition) in topic.partitions.iter().enumerate() {
            let out = &mut writer.current;
            out.put_i32(partition.partition_index);
            out.put_i16(partition.error_code);
            out.put_i64(partition.high_watermark);
            if version >= 4 {
                out.put_i64(partition.last_stable_offset);
            }
            if version >= 5 {
                out.put_i64(partition.log_start_offset);
            }
            if version >= 4 {
                let aborted = partition.aborted_transactions.as_deref();
                put_array_len(out, compact, aborted.map(<[_]>::len))?;
                for transaction in aborted.unwrap_or_default() {
                    out.put_i64(transaction.producer_id);
                    out.put_i64(transaction.first_offset);
                    if compact {
                        out.put_u8(0);
                    }
                }
            }
            if version >= 11 {
                out.put_i32(partition.preferred_read_replica);
            }
            // Never −1/null: an errored partition declares an empty record set.
            let records_bytes = partition.records_bytes;
            if compact {
                put_array_len(out, true, Some(records_bytes))?;
            } else {
                out.put_i32(length_i32("record set", records_bytes)?);
            }
            writer.hole(topic_index, partition_index, records_bytes);
            if compact {
                put_partition_tags(&mut writer.current, partition, version);
            }
        }
        if compact {
            writer.current.put_u8(0);
        }
    }
    if compact {
        writer.current.put_u8(0);
    }
    writer.flush();
    let size = length_i32(
        "response size",
        writer.total_bytes.saturating_sub(FRAME_PREFIX_BYTES),
    )?;
    if let Some(FetchPart::Bytes(first)) = writer.parts.first_mut() {
        let mut patched = BytesMut::from(first.as_ref());
        if let Some(prefix) = patched.get_mut(..FRAME_PREFIX_BYTES) {
            prefix.copy_from_slice(&size.to_be_bytes());
        }
        *first = patched.freeze();
    }
    Ok(writer.parts)
}

/// Response head (size, header, throttle, error, session, topic count) and per-topic overhead
/// besides the name, at most, in bytes.
const RESPONSE_HEAD_BYTES_MAX: usize = 32;
const TOPIC_OVERHEAD_BYTES_MAX: usize = 32;

/// About the header bytes of a fetch response of `shape` in `version` (everything but the record
/// sets): a buffer capacity, exact for versions below 12 without aborted transactions, a little
/// short for tagged fields (the buffer then grows).
fn header_bytes_estimate(version: i16, shape: &FetchResponseShape) -> usize {
    let mut partition_bytes = 4 + 2 + 8 + 4; // index, error, high watermark, record-set size
    if version >= 4 {
        partition_bytes += 8 + 4; // last stable offset, aborted-transaction count
    }
    if version >= 5 {
        partition_bytes += 8; // log start offset
    }
    if version >= 11 {
        partition_bytes += 4; // preferred read replica
    }
    if version >= 12 {
        partition_bytes += 1; // empty tag section
    }
    let aborted_bytes = 8 + 8 + 1;
    shape
        .topics
        .iter()
        .map(|topic| {
            let aborted: usize = topic
                .partitions
                .iter()
                .map(|partition| partition.aborted_transactions.as_ref().map_or(0, Vec::len))
                .sum();
            TOPIC_OVERHEAD_BYTES_MAX
                .saturating_add(topic.name.len())
                .saturating_add(topic.partitions.len().saturating_mul(partition_bytes))
                .saturating_add(aborted.saturating_mul(aborted_bytes))
        })
        .fold(RESPONSE_HEAD_BYTES_MAX, usize::saturating_add)
}

/// A partition's tagged fields (flexible versions), in tag order, only those it carries.
fn put_partition_tags(out: &mut BytesMut, partition: &FetchPartitionShape, version: i16) {
    if version < FETCH_DIVERGING_EPOCH_VERSION_MIN {
        out.put_u8(0);
        return;
    }
    let count = u32::from(partition.diverging_epoch.is_some())
        + u32::from(partition.current_leader.is_some());
    put_varint_into(out, count);
    if let Some(diverging) = partition.diverging_epoch {
        put_varint_into(out, DIVERGING_EPOCH_TAG);
        put_varint_into(out, DivergingEpoch::BYTES);
        out.put_i32(diverging.epoch);
        out.put_i64(diverging.end_offset);
        out.put_u8(0);
    }
    if let Some(leader) = partition.current_leader {
        put_varint_into(out, CURRENT_LEADER_TAG);
        put_varint_into(out, CurrentLeader::BYTES);
        out.put_i32(leader.leader_id);
        out.put_i32(leader.leader_epoch);
        out.put_u8(0);
    }
}

/// Total bytes the parts put on the wire (size prefix included).
pub fn parts_len(parts: &[FetchPart]) -> usize {
    parts.iter().map(FetchPart::len).sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::responses::encode_response;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    /// kafka-protocol's own struct for a shape whose holes hold `records`.
    fn oracle(shape: &FetchResponseShape, records: &[Vec<Bytes>], version: i16) -> FetchResponse {
        let topics = shape
            .topics
            .iter()
            .zip(records)
            .map(|(topic, records)| {
                let mut response = FetchableTopicResponse::default().with_partitions(
                    topic
                        .partitions
                        .iter()
                        .zip(records)
                        .map(|(partition, records)| {
                            PartitionData::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(partition.error_code)
                                .with_high_watermark(partition.high_watermark)
                                .with_last_stable_offset(partition.last_stable_offset)
                                .with_log_start_offset(partition.log_start_offset)
                                .with_aborted_transactions(
                                    partition.aborted_transactions.as_ref().map(|list| {
                                        list.iter()
                                            .map(|t| {
                                                AbortedTransaction::default()
                                                    .with_producer_id(ProducerId(t.producer_id))
                                                    .with_first_offset(t.first_offset)
                                            })
                                            .collect()
                                    }),
                                )
                                .with_preferred_read_replica(BrokerId(
                                    partition.preferred_read_replica,
                                ))
                                .with_diverging_epoch(partition.diverging_epoch.map_or_else(
                                    EpochEndOffset::default,
                                    |d| {
                                        EpochEndOffset::default()
                                            .with_epoch(d.epoch)
                                            .with_end_offset(d.end_offset)
                                    },
                                ))
                                .with_current_leader(partition.current_leader.map_or_else(
                                    LeaderIdAndEpoch::default,
                                    |l| {
                                        LeaderIdAndEpoch::default()
                                            .with_leader_id(BrokerId(l.leader_id))
                                            .with_leader_epoch(l.leader_epoch)
                                    },
                                ))
                                .with_records(Some(records.clone()))
                        })
                        .collect(),
                );
                if version <= 12 {
                    response.topic = TopicName(StrBytes::from_string(topic.name.clone()));
                } else {
                    response.topic_id = topic.topic_id;
                }
                response
            })
            .collect();
        FetchResponse::default()
            .with_throttle_time_ms(shape.throttle_time_ms)
            .with_error_code(shape.error_code)
            .with_session_id(shape.session_id)
            .with_responses(topics)
    }

    pub(crate) fn fill(parts: &[FetchPart], records: &[Vec<Bytes>]) -> Vec<u8> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                FetchPart::Bytes(bytes) => out.extend_from_slice(bytes),
                FetchPart::Records {
                    topic_index,
                    partition_index,
                    len,
                } => {
                    let data = &records[*topic_index][*partition_index];
                    assert_eq!(data.len(), *len);
                    out.extend_from_slice(data);
                }
            }
        }
        out
    }

    /// Zeroes the fields a version does not carry, as a broker would build its shape.
    pub(crate) fn for_version(mut shape: FetchResponseShape, version: i16) -> FetchResponseShape {
        if version < 1 {
            shape.throttle_time_ms = 0;
        }
        if version < 7 {
            shape.error_code = 0;
            shape.session_id = 0;
        }
        for topic in &mut shape.topics {
            for partition in &mut topic.partitions {
                if version < 4 {
                    partition.last_stable_offset = -1;
                    partition.aborted_transactions = None;
                }
                if version < 5 {
                    partition.log_start_offset = -1;
                }
                if version < 11 {
                    partition.preferred_read_replica = -1;
                }
                if version < FETCH_DIVERGING_EPOCH_VERSION_MIN {
                    partition.diverging_epoch = None;
                    partition.current_leader = None;
                }
            }
        }
        shape
    }

    pub(crate) fn shape_strategy() -> impl Strategy<Value = (FetchResponseShape, Vec<Vec<Bytes>>)> {
        let partition = (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(
                (any::<i64>(), any::<i64>()),
                0..3,
            )),
            any::<i32>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::option::of((0..i32::MAX, 0..i64::MAX)),
            proptest::option::of((0..i32::MAX, 0..i32::MAX)),
        )
            .prop_map(
                |(index, error, hw, lso, lsto, aborted, replica, records, diverging, leader)| {
                    (
                        FetchPartitionShape {
                            partition_index: index,
                            error_code: error,
                            high_watermark: hw,
                            last_stable_offset: lso,
                            log_start_offset: lsto,
                            aborted_transactions: aborted.map(|list| {
                                list.into_iter()
                                    .map(|(producer_id, first_offset)| AbortedTransactionShape {
                                        producer_id,
                                        first_offset,
                                    })
                                    .collect()
                            }),
                            preferred_read_replica: replica,
                            diverging_epoch: diverging
                                .map(|(epoch, end_offset)| DivergingEpoch { epoch, end_offset }),
                            current_leader: leader.map(|(leader_id, leader_epoch)| CurrentLeader {
                                leader_id,
                                leader_epoch,
                            }),
                            records_bytes: records.len(),
                        },
                        Bytes::from(records),
                    )
                },
            );
        let topic = (
            "[a-z.]{0,12}",
            any::<u128>(),
            proptest::collection::vec(partition, 0..4),
        )
            .prop_map(|(name, id, partitions)| {
                let (partitions, records): (Vec<_>, Vec<_>) = partitions.into_iter().unzip();
                (
                    FetchTopicShape {
                        name,
                        topic_id: Uuid::from_u128(id),
                        partitions,
                    },
                    records,
                )
            });
        (
            any::<i32>(),
            any::<i16>(),
            any::<i32>(),
            proptest::collection::vec(topic, 0..4),
        )
            .prop_map(|(throttle_time_ms, error_code, session_id, topics)| {
                let (topics, records): (Vec<_>, Vec<_>) = topics.into_iter().unzip();
                (
                    FetchResponseShape {
                        throttle_time_ms,
                        error_code,
                        session_id,
                        topics,
                    },
                    records,
                )
            })
    }

    proptest! {
        #[test]
        fn parts_equal_kafka_protocols_encoding((shape, records) in shape_strategy(), version in 0i16..=13, correlation_id: i32) {
            let shape = for_version(shape, version);
            let parts = encode_fetch_response(version, correlation_id, &shape).unwrap();
            let ours = fill(&parts, &records);
            prop_assert_eq!(ours.len(), parts_len(&parts));
            let size = i32::from_be_bytes(ours[..4].try_into().unwrap());
            prop_assert_eq!(size as usize + 4, ours.len());
            let theirs = encode_response(ApiKey::Fetch, version, correlation_id, &oracle(&shape, &records, version)).unwrap();
            prop_assert_eq!(ours, theirs.to_vec());
        }
    }

    #[test]
    fn legacy_v0_response_with_error_partition_declares_zero() {
        // docs/design/downconversion.md §2.3's example layout, with Skiff's choice for the error
        // partition: size 0, not −1.
        let shape = FetchResponseShape {
            topics: vec![FetchTopicShape {
                name: "t".into(),
                topic_id: Uuid::nil(),
                partitions: vec![
                    FetchPartitionShape {
                        partition_index: 0,
                        high_watermark: 6,
                        records_bytes: 70,
                        ..Default::default()
                    },
                    FetchPartitionShape {
                        partition_index: 1,
                        error_code: 35,
                        high_watermark: -1,
                        ..Default::default()
                    },
                ],
            }],
            ..Default::default()
        };
        let parts = encode_fetch_response(0, 42, &shape).unwrap();
        assert_eq!(parts.len(), 3);
        let FetchPart::Bytes(head) = &parts[0] else {
            panic!()
        };
        assert_eq!(
            head.as_ref(),
            [
                0, 0, 0, 0x79, 0, 0, 0, 0x2a, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0x46
            ]
        );
        assert_eq!(
            parts[1],
            FetchPart::Records {
                topic_index: 0,
                partition_index: 0,
                len: 70
            }
        );
        let FetchPart::Bytes(tail) = &parts[2] else {
            panic!()
        };
        assert_eq!(
            tail.as_ref(),
            [0, 0, 0, 1, 0, 0x23, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]
        );
        // The same size as Kafka's 121 in docs/design/downconversion.md §2.3: Kafka writes −1 where
        // Skiff writes 0.
        assert_eq!(parts_len(&parts), 125);
        assert_eq!(
            parts_len(&encode_fetch_response(1, 42, &shape).unwrap()),
            129
        );
    }

    #[test]
    fn versions_outside_the_layout_are_refused() {
        assert!(matches!(
            encode_fetch_response(14, 1, &FetchResponseShape::default()),
            Err(EncodeError::UnsupportedVersion { api_version: 14 })
        ));
        assert!(encode_fetch_response(-1, 1, &FetchResponseShape::default()).is_err());
    }

    #[test]
    fn the_header_buffer_is_sized_once_for_every_header_byte() {
        // A legacy response of 250 partitions with records, the memory bench's shape: every
        // header byte fits the one buffer sized up front, so no part re-allocates it.
        for version in [0i16, 2, 3, 4, 7, 11] {
            let shape = FetchResponseShape {
                topics: vec![FetchTopicShape {
                    name: "kip283-memory-topic".to_owned(),
                    partitions: (0..250)
                        .map(|index| FetchPartitionShape {
                            partition_index: index,
                            records_bytes: 1 << 20,
                            aborted_transactions: (version >= 4).then(Vec::new),
                            ..FetchPartitionShape::default()
                        })
                        .collect(),
                    ..FetchTopicShape::default()
                }],
                ..FetchResponseShape::default()
            };
            let parts = encode_fetch_response(version, 7, &shape).expect("encode");
            let header_bytes: usize = parts
                .iter()
                .map(|part| match part {
                    FetchPart::Bytes(bytes) => bytes.len(),
                    FetchPart::Records { .. } => 0,
                })
                .sum();
            let estimate = header_bytes_estimate(version, &shape);
            assert!(
                header_bytes <= estimate,
                "v{version}: {header_bytes} > {estimate}"
            );
            assert!(
                estimate <= header_bytes + 64,
                "v{version}: {estimate} ≫ {header_bytes}"
            );
        }
    }
}
