//! The Fetch response (versions 4–13) read back, for a follower's replica fetcher reading its
//! leader's answer: the bytes come from a peer broker, so kafka-protocol never decodes them
//! (its decoders reserve memory for any count a peer sends). Every count is checked against the
//! bytes that remain and a named maximum before anything is allocated, and each partition's
//! record set is a slice of the response buffer, not a copy.
//!
//! The layout is the one [`super::fetch::encode_fetch_response`] writes (that module owns it);
//! versions 0–3 carry message sets of the legacy formats, which no follower fetches.
//!
//! Must never: allocate by a count before [`crate::codec::check_count`] saw it, copy a record
//! set, or accept a response with bytes left after it.

use uuid::Uuid;

use super::fetch::{
    AbortedTransactionShape, CurrentLeader, DivergingEpoch, FetchPartitionShape,
    FetchResponseShape, FetchTopicShape, CURRENT_LEADER_TAG, DIVERGING_EPOCH_TAG,
    FETCH_DIVERGING_EPOCH_VERSION_MIN, FETCH_LAYOUT_VERSION_MAX,
};
use crate::codec::Reader;
use crate::error::DecodeError;
use crate::limits::{
    ABORTED_TRANSACTIONS_PER_PARTITION_MAX, ELEMENTS_PER_REQUEST_MAX, PARTITIONS_PER_TOPIC_MAX,
    TAGGED_FIELDS_MAX, TOPICS_PER_REQUEST_MAX,
};

/// Oldest Fetch response version this reader takes (the first with `last_stable_offset`).
pub const FETCH_READER_VERSION_MIN: i16 = 4;
/// First flexible Fetch version (compact arrays and strings, tagged fields).
const FLEXIBLE_VERSION_MIN: i16 = 12;
/// First version that names topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 13;
/// Smallest partition on the wire: index, error, HW, LSO, log start, aborted count (1 byte in the
/// compact encoding), records length, tagged fields.
const PARTITION_BYTES_MIN: usize = 4 + 2 + 8 + 8 + 1 + 1 + 1;
/// Smallest aborted transaction: producer id and first offset.
const ABORTED_TRANSACTION_BYTES_MIN: usize = 16;

/// A decoded Fetch response; record sets borrow the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponseView<'a> {
    /// The response header's correlation id.
    pub correlation_id: i32,
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error (v7+).
    pub error_code: i16,
    /// Fetch session id (v7+).
    pub session_id: i32,
    /// Topics, in response order.
    pub topics: Vec<FetchTopicView<'a>>,
}

/// One topic of a [`FetchResponseView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicView<'a> {
    /// Topic name (v4–12; empty from v13).
    pub name: &'a str,
    /// Topic id (v13; nil before).
    pub topic_id: Uuid,
    /// Partitions, in response order.
    pub partitions: Vec<FetchPartitionView<'a>>,
}

/// One partition of a [`FetchTopicView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionView<'a> {
    /// Every field but the records, as the encoder takes them (`records_bytes` is the length of
    /// `records`).
    pub fields: FetchPartitionShape,
    /// The record set, exactly the declared bytes (empty for a null or empty set).
    pub records: &'a [u8],
}

impl FetchResponseView<'_> {
    /// The response as the encoder's shape (without record bytes), for comparisons and tests.
    pub fn shape(&self) -> FetchResponseShape {
        FetchResponseShape {
            throttle_time_ms: self.throttle_time_ms,
            error_code: self.error_code,
            session_id: self.session_id,
            topics: self
                .topics
                .iter()
                .map(|topic| FetchTopicShape {
                    name: topic.name.to_owned(),
                    topic_id: topic.topic_id,
                    partitions: topic.partitions.iter().map(|p| p.fields.clone()).collect(),
                })
                .collect(),
        }
    }
}

/// Decodes a Fetch response of `version` from `frame`: the bytes after the size prefix (response
/// header, then body). Versions outside 4–13 are refused.
pub fn decode_fetch_response(
    frame: &[u8],
    version: i16,
) -> Result<FetchResponseView<'_>, DecodeError> {
    if !(FETCH_READER_VERSION_MIN..=FETCH_LAYOUT_VERSION_MAX).contains(&version) {
        return Err(DecodeError::Invalid {
            reason: "a Fetch response version outside 4 to 13",
        });
    }
    let compact = version >= FLEXIBLE_VERSION_MIN;
    let mut reader = Reader::new(frame);
    let correlation_id = reader.i32()?;
    if compact {
        // Response header v1: its tagged fields (none are defined).
        skip_tags(&mut reader)?;
    }
    let throttle_time_ms = reader.i32()?;
    let (error_code, session_id) = if version >= 7 {
        (reader.i16()?, reader.i32()?)
    } else {
        (0, 0)
    };
    let name_bytes_min = if version >= TOPIC_ID_VERSION_MIN {
        16
    } else if compact {
        1
    } else {
        2
    };
    let topic_count = array_len(
        &mut reader,
        compact,
        name_bytes_min + 1,
        TOPICS_PER_REQUEST_MAX,
    )?;
    let mut elements_left = ELEMENTS_PER_REQUEST_MAX;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let (name, topic_id) = if version >= TOPIC_ID_VERSION_MIN {
            let id: [u8; 16] = reader
                .take(16)?
                .try_into()
                .map_err(|_| DecodeError::Invalid { reason: "topic id" })?;
            ("", Uuid::from_bytes(id))
        } else if compact {
            (reader.compact_string()?, Uuid::nil())
        } else {
            (reader.string()?, Uuid::nil())
        };
        let partition_count = array_len(
            &mut reader,
            compact,
            PARTITION_BYTES_MIN,
            PARTITIONS_PER_TOPIC_MAX,
        )?;
        elements_left =
            elements_left
                .checked_sub(partition_count)
                .ok_or(DecodeError::CountTooLarge {
                    count: partition_count,
                    count_max: ELEMENTS_PER_REQUEST_MAX,
                })?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            partitions.push(decode_partition(&mut reader, version, compact)?);
        }
        if compact {
            skip_tags(&mut reader)?;
        }
        topics.push(FetchTopicView {
            name,
            topic_id,
            partitions,
        });
    }
    if compact {
        skip_tags(&mut reader)?;
    }
    reader.expect_end()?;
    Ok(FetchResponseView {
        correlation_id,
        throttle_time_ms,
        error_code,
        session_id,
        topics,
    })
}

fn decode_partition<'a>(
    reader: &mut Reader<'a>,
    version: i16,
    compact: bool,
) -> Result<FetchPartitionView<'a>, DecodeError> {
    let mut fields = FetchPartitionShape {
        partition_index: reader.i32()?,
        error_code: reader.i16()?,
        high_watermark: reader.i64()?,
        last_stable_offset: reader.i64()?,
        ..FetchPartitionShape::default()
    };
    if version >= 5 {
        fields.log_start_offset = reader.i64()?;
    }
    let aborted_count = if compact {
        reader.compact_array_len(
            ABORTED_TRANSACTION_BYTES_MIN + 1,
            ABORTED_TRANSACTIONS_PER_PARTITION_MAX,
        )?
    } else {
        reader.array_len(
            ABORTED_TRANSACTION_BYTES_MIN,
            ABORTED_TRANSACTIONS_PER_PARTITION_MAX,
        )?
    };
    fields.aborted_transactions = match aborted_count {
        None => None,
        Some(count) => {
            let mut aborted = Vec::with_capacity(count);
            for _ in 0..count {
                aborted.push(AbortedTransactionShape {
                    producer_id: reader.i64()?,
                    first_offset: reader.i64()?,
                });
                if compact {
                    skip_tags(reader)?;
                }
            }
            Some(aborted)
        }
    };
    if version >= 11 {
        fields.preferred_read_replica = reader.i32()?;
    }
    let records = if compact {
        reader.compact_nullable_bytes()?
    } else {
        reader.nullable_bytes()?
    }
    .unwrap_or_default();
    fields.records_bytes = records.len();
    if compact {
        let mut diverging_epoch = None;
        let mut current_leader = None;
        reader.tagged_fields(TAGGED_FIELDS_MAX, |tag, bytes| {
            if version < FETCH_DIVERGING_EPOCH_VERSION_MIN {
                return Ok(());
            }
            // A later occurrence of a tag replaces an earlier one, as in Kafka's readers; tags
            // this version does not know (SnapshotId, later ones) are skipped.
            match tag {
                DIVERGING_EPOCH_TAG => {
                    let mut field = Reader::new(bytes);
                    diverging_epoch = Some(DivergingEpoch {
                        epoch: field.i32()?,
                        end_offset: field.i64()?,
                    });
                    skip_tags(&mut field)?;
                    field.expect_end()
                }
                CURRENT_LEADER_TAG => {
                    let mut field = Reader::new(bytes);
                    current_leader = Some(CurrentLeader {
                        leader_id: field.i32()?,
                        leader_epoch: field.i32()?,
                    });
                    skip_tags(&mut field)?;
                    field.expect_end()
                }
                _ => Ok(()),
            }
        })?;
        fields.diverging_epoch = diverging_epoch;
        fields.current_leader = current_leader;
    }
    Ok(FetchPartitionView { fields, records })
}

/// An array count in either encoding; null is refused (Fetch responses have no null arrays but
/// the aborted transactions).
fn array_len(
    reader: &mut Reader<'_>,
    compact: bool,
    element_bytes_min: usize,
    count_max: usize,
) -> Result<usize, DecodeError> {
    let count = if compact {
        reader.compact_array_len(element_bytes_min, count_max)?
    } else {
        reader.array_len(element_bytes_min, count_max)?
    };
    count.ok_or(DecodeError::UnexpectedNull)
}

fn skip_tags(reader: &mut Reader<'_>) -> Result<(), DecodeError> {
    reader.tagged_fields(TAGGED_FIELDS_MAX, |_, _| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::responses::fetch::encode_fetch_response;
    use crate::responses::fetch::tests::{fill, for_version, shape_strategy};
    use proptest::prelude::*;

    proptest! {
        /// Every version: what the encoder writes (holes filled) reads back to the same shape and
        /// the same record bytes.
        #[test]
        fn reads_back_what_the_encoder_writes(
            (shape, records) in shape_strategy(),
            version in FETCH_READER_VERSION_MIN..=FETCH_LAYOUT_VERSION_MAX,
            correlation_id: i32,
        ) {
            let mut shape = for_version(shape, version);
            if version >= TOPIC_ID_VERSION_MIN {
                for topic in &mut shape.topics {
                    topic.name.clear();
                }
            } else {
                for topic in &mut shape.topics {
                    topic.topic_id = Uuid::nil();
                }
            }
            let parts = encode_fetch_response(version, correlation_id, &shape).unwrap();
            let wire = fill(&parts, &records);
            let view = decode_fetch_response(&wire[4..], version).unwrap();
            prop_assert_eq!(view.correlation_id, correlation_id);
            prop_assert_eq!(view.shape(), shape);
            for (topic, records) in view.topics.iter().zip(&records) {
                for (partition, bytes) in topic.partitions.iter().zip(records) {
                    prop_assert_eq!(partition.records, bytes.as_ref());
                }
            }
        }

        /// Any bytes: an answer or an error, never a panic; a truncated response is an error.
        #[test]
        fn arbitrary_and_truncated_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            version in FETCH_READER_VERSION_MIN..=FETCH_LAYOUT_VERSION_MAX,
            (shape, records) in shape_strategy(),
            cut in any::<prop::sample::Index>(),
        ) {
            let _ = decode_fetch_response(&bytes, version);
            let shape = for_version(shape, version);
            let parts = encode_fetch_response(version, 7, &shape).unwrap();
            let wire = fill(&parts, &records);
            let body = &wire[4..];
            let cut = cut.index(body.len());
            prop_assert!(decode_fetch_response(&body[..cut], version).is_err());
        }
    }

    #[test]
    fn a_huge_partition_count_is_refused_before_any_allocation() {
        // v12: correlation id, header tags, throttle, error, session, 1 topic "t", then a
        // partition count of 2^31 (compact, varint) with nothing behind it.
        let mut frame = vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, b't'];
        frame.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        assert!(matches!(
            decode_fetch_response(&frame, 12),
            Err(DecodeError::CountTooLarge { .. } | DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn versions_without_the_layout_are_refused() {
        assert!(decode_fetch_response(&[0; 64], 3).is_err());
        assert!(decode_fetch_response(&[0; 64], 14).is_err());
    }
}
