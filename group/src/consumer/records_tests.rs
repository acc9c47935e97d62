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
                        classic: (timeout % 2 == 0).then(|| ClassicMemberMetadata {
                            session_timeout_ms: timeout,
                            supported_protocols: vec![("range".into(), vec![0, 3, 1])],
                        }),
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

/// Bytes Kafka 4.1.1's own classes write for the same records: each key and value built with the
/// generated `org.apache.kafka.coordinator.group.generated.ConsumerGroup*Key` / `*Value` classes
/// of kafka-group-coordinator-4.1.1.jar and serialized as its `CoordinatorRecordSerde` does (the
/// key with `MessageUtil.toCoordinatorTypePrefixedBytes`, the value with
/// `MessageUtil.toVersionPrefixedBytes(0, value)`), printed as hex by a small Java program run on
/// the 4.1.1 jars. Topic ids are sixteen equal bytes (`t(n)`, Java's `new Uuid(v, v)`).
mod kafka_4_1_1 {
    use super::*;

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn check(record: ConsumerRecord, key: &str, value: &str) {
        let (ours_key, ours_value) = record.encode().unwrap();
        assert_eq!(ours_key, unhex(key), "key of {record:?}");
        assert_eq!(ours_value, Some(unhex(value)), "value of {record:?}");
        let decoded = ConsumerRecord::decode(&unhex(key), Some(&unhex(value))).unwrap();
        assert_eq!(decoded, record);
    }

    const GROUP_KEY: &str = "00030003677270";
    const MEMBER_METADATA_KEY: &str = "0005000367727000056d656d2d31";

    #[test]
    fn group_metadata() {
        let record = |metadata_hash| ConsumerRecord::GroupMetadata {
            group: "grp".into(),
            value: Some(GroupMetadataValue {
                epoch: 7,
                metadata_hash,
            }),
        };
        check(
            record(0x0102_0304_0506_0708),
            GROUP_KEY,
            "0000000000070100080102030405060708",
        );
        // A zero hash is the field's default: Kafka writes no tagged field.
        check(record(0), GROUP_KEY, "00000000000700");
    }

    #[test]
    fn partition_metadata() {
        let record = ConsumerRecord::PartitionMetadata {
            group: "grp".into(),
            value: Some(vec![PartitionMetadataTopic {
                topic_id: t(0x11),
                name: "t".into(),
                partitions: 3,
            }]),
        };
        check(
            record,
            "00040003677270",
            "00000211111111111111111111111111111111027400000003010000",
        );
    }

    #[test]
    fn member_metadata() {
        let names = ConsumerRecord::MemberMetadata {
            group: "grp".into(),
            member: "mem-1".into(),
            value: Some(MemberMetadataValue {
                instance_id: Some("inst".into()),
                rack_id: None,
                client_id: "cli".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 45_000,
                server_assignor: Some("uniform".into()),
                classic: None,
            }),
        };
        check(
            names,
            MEMBER_METADATA_KEY,
            "000005696e73740004636c690b2f3132372e302e302e310302610262000000afc808756e69666f726d00",
        );
        let regex = ConsumerRecord::MemberMetadata {
            group: "grp".into(),
            member: "mem-1".into(),
            value: Some(MemberMetadataValue {
                instance_id: None,
                rack_id: Some("r1".into()),
                client_id: String::new(),
                client_host: "/::1".into(),
                subscribed_topic_names: Vec::new(),
                subscribed_topic_regex: Some("t.*".into()),
                rebalance_timeout_ms: -1,
                server_assignor: None,
                classic: None,
            }),
        };
        check(
            regex,
            MEMBER_METADATA_KEY,
            "00000003723101052f3a3a310104742e2affffffff0000",
        );
    }

    #[test]
    fn member_metadata_with_classic_metadata() {
        // Kafka 4.1.1's ConsumerGroupMemberMetadataValue with ClassicMemberMetadata (session
        // 10 s, protocol "range" with metadata 00 03 01), from its generated writer.
        let classic = ConsumerRecord::MemberMetadata {
            group: "grp".into(),
            member: "mem-1".into(),
            value: Some(MemberMetadataValue {
                instance_id: None,
                rack_id: None,
                client_id: "cli".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["t".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 30_000,
                server_assignor: None,
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: 10_000,
                    supported_protocols: vec![("range".into(), vec![0, 3, 1])],
                }),
            }),
        };
        check(
            classic,
            MEMBER_METADATA_KEY,
            "0000000004636c690b2f3132372e302e302e310202740000007530000100120100002710020672616e6765040003010000",
        );
    }

    #[test]
    fn target_assignment() {
        let metadata = ConsumerRecord::TargetAssignmentMetadata {
            group: "grp".into(),
            value: Some(9),
        };
        check(metadata, "00060003677270", "00000000000900");
        let member = ConsumerRecord::TargetAssignmentMember {
            group: "grp".into(),
            member: "mem-1".into(),
            value: Some([(t(1), [0, 2].into()), (t(2), [1].into())].into()),
        };
        check(
            member,
            "0007000367727000056d656d2d31",
            "0000030101010101010101010101010101010103000000000000000200\
             0202020202020202020202020202020202000000010000",
        );
    }

    #[test]
    fn current_member_assignment() {
        let record = ConsumerRecord::CurrentMemberAssignment {
            group: "grp".into(),
            member: "mem-1".into(),
            value: Some(MemberAssignment {
                state: MemberState::UnrevokedPartitions,
                member_epoch: 5,
                previous_member_epoch: 4,
                assigned: [(t(1), [0, 2].into())].into(),
                pending_revocation: [(t(2), [1].into())].into(),
            }),
        };
        check(
            record,
            "0008000367727000056d656d2d31",
            "000000000005000000040102010101010101010101010101010101010300000000000000020002\
             0202020202020202020202020202020202000000010000",
        );
    }

    #[test]
    fn regular_expression() {
        let record = ConsumerRecord::RegularExpression {
            group: "grp".into(),
            regex: "t.*".into(),
            value: Some(RegexValue {
                topics: vec!["t1".into(), "t2".into()],
                version: 12,
                timestamp_ms: 1_700_000_000_000,
            }),
        };
        check(
            record,
            "001000036772700003742e2a",
            "000003037431037432000000000000000c0000018bcfe5680000",
        );
    }

    #[test]
    fn tombstones_are_kafkas_keys_without_a_value() {
        let record = ConsumerRecord::CurrentMemberAssignment {
            group: "grp".into(),
            member: "mem-1".into(),
            value: None,
        };
        let (key, value) = record.encode().unwrap();
        assert_eq!(key, unhex("0008000367727000056d656d2d31"));
        assert_eq!(value, None);
        assert_eq!(ConsumerRecord::decode(&key, None).unwrap(), record);
    }
}
