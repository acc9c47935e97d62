//! The consumer protocol embedded in classic JoinGroup and SyncGroup bytes (Kafka's
//! `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`, versions 0 to 3, non-flexible,
//! each after an int16 version): what a classic member subscribes to and owns, and the
//! assignment a consumer group hands a classic member in SyncGroup.
//!
//! A version above 3 is read as version 3 and anything after it is ignored, as Kafka's
//! `ConsumerProtocol.deserialize*` does for newer clients.
//!
//! Must never: allocate for a count before checking it against the bytes that remain, or panic
//! on any input.

use std::collections::{BTreeMap, BTreeSet};

use skiff_protocol::codec::Reader;
use skiff_protocol::DecodeError;

/// The highest embedded protocol version Kafka 4.1.1 knows.
pub const EMBEDDED_VERSION_MAX: i16 = 3;

/// Topics (or partitions of one topic) one subscription or assignment may name; a consumer
/// subscribed to more is not one Skiff can hold in a group anyway (a member's records bound
/// their arrays the same way).
const ELEMENTS_MAX: usize = super::records::RECORD_ELEMENTS_MAX;

/// Partitions by topic name.
pub type NamedPartitions = BTreeMap<String, BTreeSet<i32>>;

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// The version it was written at.
    pub version: i16,
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// The client assignor's user data.
    pub user_data: Option<Vec<u8>>,
    /// Partitions the member owns (v1+).
    pub owned_partitions: NamedPartitions,
    /// The generation it owns them at (v2+; -1 before).
    pub generation_id: i32,
    /// Its rack (v3+).
    pub rack_id: Option<String>,
}

/// A decoded `ConsumerProtocolAssignment`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EmbeddedAssignment {
    /// Assigned partitions.
    pub partitions: NamedPartitions,
    /// The client assignor's user data.
    pub user_data: Option<Vec<u8>>,
}

/// Reads the leading version: negative is malformed; above [`EMBEDDED_VERSION_MAX`] reads as it.
fn version(reader: &mut Reader<'_>) -> Result<i16, DecodeError> {
    let version = reader.i16()?;
    if version < 0 {
        return Err(DecodeError::NegativeLength {
            length: i64::from(version),
        });
    }
    Ok(version.min(EMBEDDED_VERSION_MAX))
}

/// The version of embedded bytes (Kafka's `ConsumerProtocol.deserializeVersion`).
pub fn decode_version(bytes: &[u8]) -> Result<i16, DecodeError> {
    version(&mut Reader::new(bytes))
}

fn partitions(reader: &mut Reader<'_>) -> Result<NamedPartitions, DecodeError> {
    let mut out = NamedPartitions::new();
    // Each topic takes at least its name length and its partition count.
    let count = reader.array_len(6, ELEMENTS_MAX)?.unwrap_or(0);
    for _ in 0..count {
        let topic = reader.string()?.to_owned();
        let partitions = reader.array_len(4, ELEMENTS_MAX)?.unwrap_or(0);
        let entry = out.entry(topic).or_default();
        for _ in 0..partitions {
            entry.insert(reader.i32()?);
        }
    }
    out.retain(|_, partitions| !partitions.is_empty());
    Ok(out)
}

/// Decodes a JoinGroup protocol's metadata.
pub fn decode_subscription(bytes: &[u8]) -> Result<Subscription, DecodeError> {
    let mut reader = Reader::new(bytes);
    let version = version(&mut reader)?;
    let count = reader.array_len(2, ELEMENTS_MAX)?.unwrap_or(0);
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(reader.string()?.to_owned());
    }
    let user_data = reader.nullable_bytes()?.map(<[u8]>::to_vec);
    let mut subscription = Subscription {
        version,
        topics,
        user_data,
        generation_id: -1,
        ..Subscription::default()
    };
    if version >= 1 {
        subscription.owned_partitions = partitions(&mut reader)?;
    }
    if version >= 2 {
        subscription.generation_id = reader.i32()?;
    }
    if version >= 3 {
        subscription.rack_id = reader.nullable_string()?.map(str::to_owned);
    }
    Ok(subscription)
}

/// Decodes a SyncGroup assignment (an empty one means nothing assigned, as Kafka's
/// `ClassicGroupMember.EMPTY_ASSIGNMENT`).
pub fn decode_assignment(bytes: &[u8]) -> Result<EmbeddedAssignment, DecodeError> {
    if bytes.is_empty() {
        return Ok(EmbeddedAssignment::default());
    }
    let mut reader = Reader::new(bytes);
    version(&mut reader)?;
    let partitions = partitions(&mut reader)?;
    let user_data = reader.nullable_bytes()?.map(<[u8]>::to_vec);
    Ok(EmbeddedAssignment {
        partitions,
        user_data,
    })
}

/// Encodes an assignment at `version` (clamped to 0..=3; Kafka answers a classic member at the
/// version of its first protocol's subscription), without user data.
pub fn encode_assignment(partitions: &NamedPartitions, version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&version.clamp(0, EMBEDDED_VERSION_MAX).to_be_bytes());
    put_partitions(&mut out, partitions);
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    // Topic names are at most 249 bytes; anything longer was refused before it got here.
    let len = i16::try_from(text.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    let bytes = text.as_bytes();
    out.extend_from_slice(
        bytes
            .get(..usize::try_from(len).unwrap_or(0))
            .unwrap_or(bytes),
    );
}

fn put_count(out: &mut Vec<u8>, count: usize) {
    out.extend_from_slice(&i32::try_from(count).unwrap_or(i32::MAX).to_be_bytes());
}

fn put_partitions(out: &mut Vec<u8>, partitions: &NamedPartitions) {
    put_count(out, partitions.len());
    for (topic, set) in partitions {
        put_string(out, topic);
        put_count(out, set.len());
        for partition in set {
            out.extend_from_slice(&partition.to_be_bytes());
        }
    }
}

/// Encodes a subscription (tests and simulations play classic clients with it).
#[cfg(test)]
pub fn encode_subscription(subscription: &Subscription) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&subscription.version.to_be_bytes());
    put_count(&mut out, subscription.topics.len());
    for topic in &subscription.topics {
        put_string(&mut out, topic);
    }
    match &subscription.user_data {
        Some(data) => {
            put_count(&mut out, data.len());
            out.extend_from_slice(data);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    if subscription.version >= 1 {
        put_partitions(&mut out, &subscription.owned_partitions);
    }
    if subscription.version >= 2 {
        out.extend_from_slice(&subscription.generation_id.to_be_bytes());
    }
    if subscription.version >= 3 {
        match &subscription.rack_id {
            Some(rack) => put_string(&mut out, rack),
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(topic: &str, list: &[i32]) -> NamedPartitions {
        BTreeMap::from([(topic.to_owned(), list.iter().copied().collect())])
    }

    #[test]
    fn subscriptions_round_trip_at_every_version() {
        for version in 0..=EMBEDDED_VERSION_MAX {
            let subscription = Subscription {
                version,
                topics: vec!["a".into(), "b".into()],
                user_data: Some(vec![1, 2]),
                owned_partitions: if version >= 1 {
                    named("a", &[0, 2])
                } else {
                    NamedPartitions::new()
                },
                generation_id: if version >= 2 { 7 } else { -1 },
                rack_id: (version >= 3).then(|| "r1".to_owned()),
            };
            let bytes = encode_subscription(&subscription);
            assert_eq!(decode_subscription(&bytes), Ok(subscription));
        }
    }

    #[test]
    fn a_java_clients_assignment_decodes_and_ours_matches_its_layout() {
        // Kafka's ConsumerProtocol.serializeAssignment of {t: [0, 1]} at version 3, no user data.
        let java = [
            0, 3, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 255, 255, 255, 255,
        ];
        let decoded = decode_assignment(&java).expect("decodes");
        assert_eq!(decoded.partitions, named("t", &[0, 1]));
        assert_eq!(decoded.user_data, None);
        assert_eq!(encode_assignment(&named("t", &[0, 1]), 3), java.to_vec());
        assert_eq!(decode_assignment(&[]), Ok(EmbeddedAssignment::default()));
    }

    #[test]
    fn malformed_bytes_are_errors_not_panics() {
        for bytes in [&[0xff, 0xff][..], &[0, 1, 0x7f, 0xff, 0xff, 0xff], &[0]] {
            assert!(decode_subscription(bytes).is_err());
        }
        assert!(decode_assignment(&[0, 0, 0, 0, 0, 1]).is_err());
    }
}
