use super::*;
use proptest::prelude::*;

fn t(n: u8) -> TopicId {
    TopicId([n; 16])
}

#[test]
fn current_assignment_layout_is_kafkas() {
    let record = ConsumerRecord::CurrentMemberAssignment {
        group: "g".into(),
        member: "m".into(),
        value: Some(MemberAssignment {
            state: MemberState::UnrevokedPartitions,
            member_epoch: 5,
            previous_member_epoch: 4,
            assigned: [(t(1), [0, 2].into())].into(),
            pending_revocation: Assignment::new(),
        }),
    };
    let (key, value) = record.encode().unwrap();
    assert_eq!(key, [0, 8, 0, 1, b'g', 0, 1, b'm']);
    let mut expected = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 1];
    expected.push(2); // one topic
    expected.extend([1; 16]);
    expected.extend([3, 0, 0, 0, 0, 0, 0, 0, 2, 0]); // two partitions, no tags
    expected.extend([1, 0]); // no pending revocation, no tags
    assert_eq!(value.as_deref(), Some(&expected[..]));
    assert_eq!(
        ConsumerRecord::decode(&key, value.as_deref()).unwrap(),
        record
    );
}

#[test]
fn group_metadata_carries_the_hash_as_tag_zero_and_skips_unknown_tags() {
    let record = ConsumerRecord::GroupMetadata {
        group: "g".into(),
        value: Some(GroupMetadataValue {
            epoch: 7,
            metadata_hash: 9,
        }),
    };
    let (key, value) = record.encode().unwrap();
    let value = value.unwrap();
    assert_eq!(value, [0, 0, 0, 0, 0, 7, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9]);
    assert_eq!(ConsumerRecord::decode(&key, Some(&value)).unwrap(), record);
    // A later Kafka's tag 1 (an i64) is skipped.
    let later = [0, 0, 0, 0, 0, 7, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 1];
    let decoded = ConsumerRecord::decode(&key, Some(&later)).unwrap();
    assert_eq!(
        decoded,
        ConsumerRecord::GroupMetadata {
            group: "g".into(),
            value: Some(GroupMetadataValue {
                epoch: 7,
                metadata_hash: 0
            })
        }
    );
}

#[test]
fn foreign_key_types_and_versions_are_errors() {
    assert!(matches!(
        ConsumerRecord::decode(&[0, 1, 0, 0], None),
        Err(ConsumerRecordError::UnknownRecordType { record_type: 1 })
    ));
    assert!(matches!(
        ConsumerRecord::decode(&[0, 6, 0, 1, b'g'], Some(&[0, 1, 0, 0, 0, 1, 0])),
        Err(ConsumerRecordError::UnknownValueVersion { .. })
    ));
    // A partition count far beyond the bytes present.
    assert!(ConsumerRecord::decode(
        &[0, 7, 0, 1, b'g', 0, 1, b'm'],
        Some(&[0, 0, 0xff, 0xff, 0x0f])
    )
    .is_err());
}

fn name() -> impl Strategy<Value = String> {
    "[a-z.*|-]{0,12}"
}

fn assignment() -> impl Strategy<Value = Assignment> {
    proptest::collection::btree_map(
        (0..4u8).prop_map(t),
        proptest::collection::btree_set(any::<i32>(), 1..5),
        0..3,
    )
}

fn record() -> impl Strategy<Value = ConsumerRecord> {
    let tombstone = any::<bool>();
    prop_oneof![
        (name(), any::<i32>(), any::<i64>(), tombstone).prop_map(
            |(group, epoch, metadata_hash, dead)| {
                ConsumerRecord::GroupMetadata {
                    group,
                    value: (!dead).then_some(GroupMetadataValue {
                        epoch,
                        metadata_hash,
                    }),
                }
            }
        ),
        (
            name(),
            name(),
            any::<i32>(),
            name(),
            proptest::option::of(name()),
            proptest::collection::vec(name(), 0..3)
        )
            .prop_map(|(group, member, timeout, client, regex, topics)| {
                ConsumerRecord::MemberMetadata {
                    group,
                    member,
                    value: Some(MemberMetadataValue {
                        instance_id: regex.clone(),
                        rack_id: None,
                        client_id: client.clone(),
                        client_host: client,
                        subscribed_topic_names: topics,
                        subscribed_topic_regex: regex,
                        rebalance_timeout_ms: timeout,
                        server_assignor: Some("uniform".into()),
                    }),
                }
            }),
        (name(), proptest::option::of(any::<i32>()))
            .prop_map(|(group, value)| ConsumerRecord::TargetAssignmentMetadata { group, value }),
        (name(), name(), proptest::option::of(assignment())).prop_map(|(group, member, value)| {
            ConsumerRecord::TargetAssignmentMember {
                group,
                member,
                value,
            }
        }),
        (
            name(),
            name(),
            any::<i32>(),
            any::<i32>(),
            0..3i8,
            assignment(),
            assignment()
        )
            .prop_map(
                |(
                    group,
                    member,
                    member_epoch,
                    previous_member_epoch,
                    state,
                    assigned,
                    pending_revocation,
                )| {
                    ConsumerRecord::CurrentMemberAssignment {
                        group,
                        member,
                        value: Some(MemberAssignment {
                            state: MemberState::from_value(state),
                            member_epoch,
                            previous_member_epoch,
                            assigned,
                            pending_revocation,
                        }),
                    }
                }
            ),
        (
            name(),
            name(),
            proptest::collection::vec(name(), 0..4),
            any::<i64>(),
            any::<i64>(),
            tombstone
        )
            .prop_map(|(group, regex, topics, version, timestamp_ms, dead)| {
                ConsumerRecord::RegularExpression {
                    group,
                    regex,
                    value: (!dead).then_some(RegexValue {
                        topics,
                        version,
                        timestamp_ms,
                    }),
                }
            }),
        (
            name(),
            proptest::collection::vec((name(), any::<i32>()), 0..3)
        )
            .prop_map(|(group, topics)| {
                ConsumerRecord::PartitionMetadata {
                    group,
                    value: Some(
                        topics
                            .into_iter()
                            .map(|(name, partitions)| PartitionMetadataTopic {
                                topic_id: t(3),
                                name,
                                partitions,
                            })
                            .collect(),
                    ),
                }
            }),
    ]
}

proptest! {
    #[test]
    fn records_round_trip(record in record()) {
        let (key, value) = record.encode().unwrap();
        prop_assert_eq!(ConsumerRecord::decode(&key, value.as_deref()).unwrap(), record);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        kind in prop_oneof![Just(3i16), Just(4), Just(5), Just(6), Just(7), Just(8), Just(16), any::<i16>()],
        key in proptest::collection::vec(any::<u8>(), 0..20),
        value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..120)),
    ) {
        let mut full_key = kind.to_be_bytes().to_vec();
        full_key.extend(&key);
        let mut full_value = value.clone().map(|v| { let mut out = vec![0, 0]; out.extend(v); out });
        let _ = ConsumerRecord::decode(&full_key, full_value.as_deref());
        full_value = value;
        let _ = ConsumerRecord::decode(&key, full_value.as_deref());
    }
}
