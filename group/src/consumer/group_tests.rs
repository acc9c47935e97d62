use super::*;
use crate::consumer::{epochs, partition_count};

const G: &str = "g";

fn topics() -> TopicImage {
    TopicImage {
        version: 1,
        by_name: [
            ("orders".to_owned(), (TopicId([1; 16]), 4)),
            ("events".to_owned(), (TopicId([2; 16]), 2)),
        ]
        .into(),
    }
}

fn join(member: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: G.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["orders".into()]),
        topic_partitions: Some(Assignment::new()),
        client_id: "c".into(),
        client_host: "/h".into(),
        ..HeartbeatRequest::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<Assignment>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: G.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: owned,
        client_id: "c".into(),
        client_host: "/h".into(),
        ..HeartbeatRequest::default()
    }
}

fn groups() -> ConsumerGroups {
    ConsumerGroups::new(ConsumerGroupConfig::default())
}

fn send(
    groups: &mut ConsumerGroups,
    request: &HeartbeatRequest,
    now: i64,
) -> Result<HeartbeatOutcome, HeartbeatError> {
    groups.heartbeat(request, 1, now, &topics(), "fresh")
}

#[test]
fn second_member_waits_for_the_first_to_revoke() {
    let mut groups = groups();
    let a = send(&mut groups, &join("a"), 0).unwrap().response;
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS_DEFAULT);
    let a_owned = a.assignment.clone().unwrap();
    assert_eq!(partition_count(&a_owned), 4);
    let b = send(&mut groups, &join("b"), 1).unwrap().response;
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        partition_count(b.assignment.as_ref().unwrap()),
        0,
        "b's partitions are unreleased"
    );
    assert_eq!(
        groups.group(G).unwrap().state(),
        ConsumerGroupState::Reconciling
    );
    // a learns it must give two up, keeping its epoch until it does.
    let a2 = send(&mut groups, &beat("a", 1, Some(a_owned.clone())), 2)
        .unwrap()
        .response;
    assert_eq!(a2.member_epoch, 1);
    let kept = a2.assignment.clone().unwrap();
    assert_eq!(partition_count(&kept), 2);
    // An unchanged heartbeat gets no assignment.
    let again = send(&mut groups, &beat("a", 1, Some(a_owned)), 3)
        .unwrap()
        .response;
    assert_eq!(again.assignment, None);
    let a3 = send(&mut groups, &beat("a", 1, Some(kept.clone())), 4)
        .unwrap()
        .response;
    assert_eq!(a3.member_epoch, 2);
    let b2 = send(&mut groups, &beat("b", 2, Some(Assignment::new())), 5)
        .unwrap()
        .response;
    assert_eq!(partition_count(b2.assignment.as_ref().unwrap()), 2);
    assert_eq!(groups.group(G).unwrap().state(), ConsumerGroupState::Stable);
    let description = groups.describe(G).unwrap();
    assert_eq!(
        (
            description.state,
            description.group_epoch,
            description.assignor_name
        ),
        ("Stable", 2, "uniform")
    );
}

#[test]
fn a_member_may_join_subscribed_to_nothing_yet() {
    // Kafka's consumer joins with an empty name list while its client-side pattern matches no
    // topic, and may send no owned partitions at all; Kafka 4.1.1 accepts both.
    let mut groups = groups();
    let empty = HeartbeatRequest {
        subscribed_topic_names: Some(vec![]),
        topic_partitions: None,
        ..join("a")
    };
    let joined = send(&mut groups, &empty, 0).unwrap().response;
    assert_eq!(
        (joined.member_epoch, joined.assignment),
        (1, Some(Assignment::new()))
    );
    // Its subscription arrives later and it gets partitions.
    let subscribed = HeartbeatRequest {
        subscribed_topic_names: Some(vec!["orders".into()]),
        ..beat("a", 1, Some(Assignment::new()))
    };
    let assigned = send(&mut groups, &subscribed, 1).unwrap().response;
    assert_eq!(partition_count(&assigned.assignment.unwrap()), 4);
}

#[test]
fn requests_are_validated_with_kafkas_messages() {
    let mut groups = groups();
    let cases: Vec<(HeartbeatRequest, i16, &str)> = vec![
        (join(""), 1, "MemberId can't be empty."),
        (
            HeartbeatRequest {
                rebalance_timeout_ms: -1,
                ..join("a")
            },
            1,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            HeartbeatRequest {
                topic_partitions: Some([(TopicId([1; 16]), [0].into())].into()),
                ..join("a")
            },
            1,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            HeartbeatRequest {
                subscribed_topic_names: None,
                subscribed_topic_regex: None,
                ..join("a")
            },
            1,
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        (
            HeartbeatRequest {
                member_epoch: -3,
                ..join("a")
            },
            1,
            "MemberEpoch is invalid.",
        ),
        (
            HeartbeatRequest {
                member_epoch: -2,
                ..join("a")
            },
            1,
            "InstanceId can't be null.",
        ),
        (
            HeartbeatRequest {
                group_id: " ".into(),
                ..join("a")
            },
            1,
            "GroupId can't be empty.",
        ),
    ];
    for (request, version, message) in cases {
        let error = groups
            .heartbeat(&request, version, 0, &topics(), "x")
            .unwrap_err();
        assert_eq!((error.code(), error.message()), (42, message));
    }
    let error = send(
        &mut groups,
        &HeartbeatRequest {
            server_assignor: Some("sticky".into()),
            ..join("a")
        },
        0,
    )
    .unwrap_err();
    assert_eq!(error.code(), error_code::UNSUPPORTED_ASSIGNOR);
    assert_eq!(
        error.message(),
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    );
    // v0 lets the coordinator make the member id.
    let outcome = groups
        .heartbeat(&join(""), 0, 0, &topics(), "made-here")
        .unwrap();
    assert_eq!(outcome.response.member_id, "made-here");
    let error = send(&mut groups, &beat("zz", 1, None), 0).unwrap_err();
    assert_eq!(error.code(), skiff_protocol::error_code::UNKNOWN_MEMBER_ID);
    let error = send(&mut groups, &beat("made-here", 7, None), 0).unwrap_err();
    assert_eq!(error.code(), error_code::FENCED_MEMBER_EPOCH);
    let error = send(
        &mut ConsumerGroups::new(ConsumerGroupConfig::default()),
        &beat("a", 1, None),
        0,
    )
    .unwrap_err();
    assert_eq!(error.message(), "Consumer group g not found.");
}

#[test]
fn group_max_size_is_enforced() {
    let mut groups = ConsumerGroups::new(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    send(&mut groups, &join("a"), 0).unwrap();
    let error = send(&mut groups, &join("b"), 0).unwrap_err();
    assert_eq!(
        error.message(),
        "The consumer group has reached its maximum capacity of 1 members."
    );
    send(&mut groups, &beat("a", 1, None), 1).unwrap();
}

#[test]
fn static_member_leaves_and_its_successor_inherits_the_partitions() {
    let mut groups = groups();
    let first = HeartbeatRequest {
        instance_id: Some("i".into()),
        ..join("a")
    };
    let owned = send(&mut groups, &first, 0)
        .unwrap()
        .response
        .assignment
        .unwrap();
    let taken = send(
        &mut groups,
        &HeartbeatRequest {
            instance_id: Some("i".into()),
            ..join("b")
        },
        1,
    )
    .unwrap_err();
    assert_eq!(taken.code(), error_code::UNRELEASED_INSTANCE_ID);
    let leave = HeartbeatRequest {
        instance_id: Some("i".into()),
        ..beat("a", epochs::LEAVE_STATIC, None)
    };
    assert_eq!(
        send(&mut groups, &leave, 2).unwrap().response.member_epoch,
        -2
    );
    let epoch = groups.group(G).unwrap().group_epoch();
    let back = send(
        &mut groups,
        &HeartbeatRequest {
            instance_id: Some("i".into()),
            ..join("b")
        },
        3,
    )
    .unwrap()
    .response;
    assert_eq!(back.assignment, Some(owned));
    assert_eq!(
        groups.group(G).unwrap().group_epoch(),
        epoch,
        "no rebalance for a returning static member"
    );
    assert!(groups.group(G).unwrap().members().contains_key("b"));
    assert!(!groups.group(G).unwrap().members().contains_key("a"));
}

#[test]
fn leaving_and_expiring_remove_the_member_and_bump_the_epoch() {
    let mut groups = groups();
    send(&mut groups, &join("a"), 0).unwrap();
    send(&mut groups, &join("b"), 0).unwrap();
    let left = send(&mut groups, &beat("a", epochs::LEAVE, None), 1).unwrap();
    assert_eq!(left.response.member_epoch, -1);
    assert_eq!(groups.group(G).unwrap().group_epoch(), 3);
    assert_eq!(
        groups.next_deadline_ms(),
        Some(SESSION_TIMEOUT_MS_DEFAULT.into())
    );
    let expired = groups.tick(i64::from(SESSION_TIMEOUT_MS_DEFAULT), &topics());
    assert!(!expired.is_empty());
    assert_eq!(groups.group(G).unwrap().state(), ConsumerGroupState::Empty);
    assert_eq!(groups.next_deadline_ms(), None);
}

#[test]
fn a_member_that_never_revokes_is_removed_at_its_rebalance_deadline() {
    let mut groups = groups();
    send(&mut groups, &join("a"), 0).unwrap();
    send(&mut groups, &join("b"), 0).unwrap();
    let all: Assignment = [(TopicId([1; 16]), (0..4).collect())].into();
    send(&mut groups, &beat("a", 1, Some(all.clone())), 1).unwrap();
    // Keeps heartbeating (its session stays alive) but never lets go.
    send(&mut groups, &beat("a", 1, Some(all.clone())), 20_000).unwrap();
    send(&mut groups, &beat("b", 2, Some(Assignment::new())), 20_000).unwrap();
    let fenced = groups.tick(30_001, &topics());
    assert!(!fenced.is_empty());
    assert!(!groups.group(G).unwrap().members().contains_key("a"));
}

#[test]
fn regex_subscriptions_resolve_and_bad_patterns_are_refused() {
    let mut groups = groups();
    let request = HeartbeatRequest {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("ord.*|ev.nts".into()),
        ..join("a")
    };
    let response = send(&mut groups, &request, 0).unwrap().response;
    assert_eq!(partition_count(response.assignment.as_ref().unwrap()), 6);
    assert_eq!(
        groups.group(G).unwrap().resolved_regexes()["ord.*|ev.nts"].topics,
        vec!["events", "orders"]
    );
    let bad = HeartbeatRequest {
        subscribed_topic_regex: Some("(".into()),
        ..join("b")
    };
    let error = send(&mut groups, &bad, 0).unwrap_err();
    assert_eq!(
        error.code(),
        skiff_protocol::error_code::INVALID_REGULAR_EXPRESSION
    );
    assert!(error
        .message()
        .starts_with("SubscribedTopicRegex `(` is not a valid regular expression: "));
    // The syntax is checked with the request, before the group or member is looked at.
    let elsewhere = HeartbeatRequest {
        group_id: "other".into(),
        subscribed_topic_regex: Some("[".into()),
        ..beat("z", 4, None)
    };
    assert_eq!(
        send(&mut groups, &elsewhere, 0).unwrap_err().code(),
        skiff_protocol::error_code::INVALID_REGULAR_EXPRESSION
    );
    // The last member using it leaves: the pattern's record is deleted.
    let left = send(&mut groups, &beat("a", epochs::LEAVE, None), 1).unwrap();
    assert!(left
        .records
        .iter()
        .any(|r| matches!(r, ConsumerRecord::RegularExpression { value: None, .. })));
}

/// Hides the topics whose names start with "secret".
struct NoSecrets;

impl crate::consumer::regex::TopicDescribeCheck for NoSecrets {
    fn may_describe(&self, topic: &str) -> bool {
        !topic.starts_with("secret")
    }
}

fn resolved(groups: &ConsumerGroups, regex: &str) -> Vec<String> {
    groups.group(G).unwrap().resolved_regexes()[regex]
        .topics
        .clone()
}

#[test]
fn patterns_resolve_to_visible_topics_and_refresh_on_kafkas_schedule() {
    use crate::consumer::regex::{TopicVisibility, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS};
    let visibility = TopicVisibility::checked(std::sync::Arc::new(NoSecrets));
    let mut groups = groups();
    let mut image = topics();
    image
        .by_name
        .insert("secret-orders".into(), (TopicId([3; 16]), 1));
    let request = HeartbeatRequest {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some(".*orders".into()),
        topic_visibility: visibility.clone(),
        ..join("a")
    };
    let joined = groups.heartbeat(&request, 1, 0, &image, "fresh").unwrap();
    // The topic the member may not describe is left out of the resolution and the assignment.
    assert_eq!(resolved(&groups, ".*orders"), vec!["orders"]);
    assert_eq!(
        partition_count(joined.response.assignment.as_ref().unwrap()),
        4
    );
    let epoch = joined.response.member_epoch;
    let heartbeat = HeartbeatRequest {
        topic_visibility: visibility,
        ..beat("a", epoch, None)
    };
    // A topic created: not resolved again before the batch interval has passed...
    image.version += 1;
    image
        .by_name
        .insert("more-orders".into(), (TopicId([4; 16]), 2));
    let early = REGEX_BATCH_REFRESH_MIN_INTERVAL_MS - 1;
    groups.heartbeat(&heartbeat, 1, early, &image, "x").unwrap();
    assert_eq!(resolved(&groups, ".*orders"), vec!["orders"]);
    // ...then by the first heartbeat after it.
    let due = REGEX_BATCH_REFRESH_MIN_INTERVAL_MS;
    let outcome = groups.heartbeat(&heartbeat, 1, due, &image, "x").unwrap();
    assert_eq!(resolved(&groups, ".*orders"), vec!["more-orders", "orders"]);
    assert!(outcome.records.iter().any(|r| matches!(
        r,
        ConsumerRecord::RegularExpression { value: Some(v), .. } if v.timestamp_ms == due
    )));
    // With no topic change, only the refresh interval brings the next resolution: a heartbeat
    // without the check (as after the member's ACLs were dropped) sees the hidden topic then.
    let epoch = groups.group(G).unwrap().members()["a"]
        .assignment
        .member_epoch;
    let open = beat("a", epoch, None);
    let interval = i64::from(ConsumerGroupConfig::default().regex_refresh_interval_ms);
    groups
        .heartbeat(&open, 1, due + interval - 1, &image, "x")
        .unwrap();
    assert_eq!(resolved(&groups, ".*orders").len(), 2);
    groups
        .heartbeat(&open, 1, due + interval, &image, "x")
        .unwrap();
    assert_eq!(
        resolved(&groups, ".*orders"),
        vec!["more-orders", "orders", "secret-orders"]
    );
}

#[test]
fn replaying_the_records_rebuilds_the_group() {
    let mut groups = groups();
    let mut log = Vec::new();
    for request in [
        join("a"),
        join("b"),
        beat("a", 1, None),
        HeartbeatRequest {
            instance_id: Some("s".into()),
            ..join("c")
        },
    ] {
        log.extend(send(&mut groups, &request, 0).unwrap().records);
    }
    log.extend(
        send(&mut groups, &beat("b", epochs::LEAVE, None), 1)
            .unwrap()
            .records,
    );
    let mut replayed = ConsumerGroups::new(ConsumerGroupConfig::default());
    for record in &log {
        replayed.replay(record);
    }
    let (live, back) = (groups.group(G).unwrap(), replayed.group(G).unwrap());
    assert_eq!(live.members(), back.members());
    assert_eq!(
        (live.group_epoch(), live.assignment_epoch()),
        (back.group_epoch(), back.assignment_epoch())
    );
    assert_eq!(groups.describe(G), replayed.describe(G));
}

#[test]
fn offset_commits_and_fetches_need_the_current_epoch() {
    let mut groups = groups();
    send(&mut groups, &join("a"), 0).unwrap();
    assert_eq!(groups.validate_offset_commit(G, "a", 1, false, 9), Ok(()));
    let stale = groups
        .validate_offset_commit(G, "a", 0, false, 9)
        .unwrap_err();
    assert_eq!(stale.code(), error_code::STALE_MEMBER_EPOCH);
    assert_eq!(stale.to_string(), "STALE_MEMBER_EPOCH: The received member epoch 0 does not match the expected member epoch 1.");
    assert_eq!(
        groups
            .validate_offset_commit(G, "a", 1, false, 8)
            .unwrap_err()
            .code(),
        35
    );
    assert_eq!(
        groups
            .validate_offset_commit(G, "x", 1, false, 9)
            .unwrap_err()
            .code(),
        25
    );
    assert_eq!(groups.validate_offset_fetch(G, None, -1), Ok(()));
    assert_eq!(groups.validate_offset_fetch(G, Some("a"), 1), Ok(()));
    assert_eq!(
        groups
            .validate_offset_fetch(G, Some("a"), 2)
            .unwrap_err()
            .code(),
        error_code::STALE_MEMBER_EPOCH
    );
    // An admin's commit (epoch -1) passes once the group is empty.
    send(&mut groups, &beat("a", epochs::LEAVE, None), 1).unwrap();
    assert_eq!(groups.validate_offset_commit(G, "", -1, false, 9), Ok(()));
}

#[test]
fn new_partitions_bump_the_epoch_and_get_assigned() {
    let mut groups = groups();
    send(&mut groups, &join("a"), 0).unwrap();
    let mut grown = topics();
    grown.version = 2;
    grown.by_name.insert("orders".into(), (TopicId([1; 16]), 6));
    let response = groups
        .heartbeat(&beat("a", 1, None), 1, 1, &grown, "x")
        .unwrap()
        .response;
    assert_eq!(response.member_epoch, 2);
    assert_eq!(partition_count(response.assignment.as_ref().unwrap()), 6);
}

#[test]
fn only_an_empty_group_is_deleted_and_stray_tombstones_create_nothing() {
    let mut groups = groups();
    send(&mut groups, &join("a"), 0).unwrap();
    assert_eq!(groups.delete(G), Err(DeleteGroupError::NonEmptyGroup));
    send(&mut groups, &beat("a", epochs::LEAVE, None), 1).unwrap();
    let tombstones = groups.delete(G).unwrap();
    assert!(tombstones.iter().all(ConsumerRecord::is_tombstone));
    assert!(groups.group(G).is_none());
    assert_eq!(groups.delete(G), Err(DeleteGroupError::GroupIdNotFound));
    for record in &tombstones {
        groups.replay(record);
    }
    assert_eq!(groups.group_ids().count(), 0);
}

#[test]
fn config_is_checked_as_kafka_does() {
    assert_eq!(ConsumerGroupConfig::default().validate(), Ok(()));
    let slow = ConsumerGroupConfig {
        heartbeat_interval_ms: 45_000,
        ..ConsumerGroupConfig::default()
    };
    assert_eq!(
        slow.validate(),
        Err(ConsumerConfigError::HeartbeatNotBelowSession)
    );
    let none = ConsumerGroupConfig {
        assignors: vec![],
        ..ConsumerGroupConfig::default()
    };
    assert!(none.validate().is_err());
}

mod arbitrary {
    use super::*;
    use proptest::prelude::*;

    fn request() -> impl Strategy<Value = HeartbeatRequest> {
        let member = prop_oneof![Just(""), Just("a"), Just("b"), Just("c")];
        let names = proptest::option::of(proptest::collection::vec(
            prop_oneof![Just("orders"), Just("events"), Just("missing")].prop_map(str::to_owned),
            0..3,
        ));
        let regex = proptest::option::of(prop_oneof![
            Just(""),
            Just("o.*"),
            Just("("),
            Just("events|x")
        ]);
        let owned = proptest::option::of(proptest::collection::btree_map(
            (1..3u8).prop_map(|n| TopicId([n; 16])),
            proptest::collection::btree_set(-1..6i32, 0..4),
            0..2,
        ));
        (
            member,
            -3..4i32,
            proptest::option::of(prop_oneof![Just("i"), Just("j")]),
            names,
            regex,
            owned,
            any::<bool>(),
            0..3i16,
        )
            .prop_map(
                |(member, epoch, instance, names, regex, owned, timeout, _)| HeartbeatRequest {
                    group_id: G.into(),
                    member_id: member.into(),
                    member_epoch: epoch,
                    instance_id: instance.map(str::to_owned),
                    rebalance_timeout_ms: if timeout { 5_000 } else { -1 },
                    subscribed_topic_names: names,
                    subscribed_topic_regex: regex.map(str::to_owned),
                    topic_partitions: owned,
                    ..HeartbeatRequest::default()
                },
            )
    }

    proptest! {
        /// Any sequence of heartbeats, versions and ticks: no panic, epochs never go back, no
        /// partition owned twice, and the records rebuild the live group.
        #[test]
        fn any_heartbeats_keep_the_group_consistent(
            steps in proptest::collection::vec((request(), 0..2i16, 0..20_000i64), 1..40)
        ) {
            let mut groups = groups();
            let mut log = Vec::new();
            let mut now = 0;
            let mut epoch = 0;
            for (request, version, advance) in steps {
                now += advance;
                log.extend(groups.tick(now, &topics()));
                if let Ok(outcome) = groups.heartbeat(&request, version, now, &topics(), "made") {
                    log.extend(outcome.records);
                }
                let Some(group) = groups.group(G) else { continue };
                prop_assert!(group.group_epoch() >= epoch && group.assignment_epoch() <= group.group_epoch());
                epoch = group.group_epoch();
                let mut seen = std::collections::BTreeSet::new();
                for member in group.members().values() {
                    for (topic, partitions) in member.assignment.assigned.iter().chain(&member.assignment.pending_revocation) {
                        for partition in partitions {
                            prop_assert!(seen.insert((*topic, *partition)), "{topic:?}-{partition} owned twice");
                        }
                    }
                }
            }
            let mut replayed = ConsumerGroups::new(ConsumerGroupConfig::default());
            for record in &log {
                prop_assert!(record.encode().is_ok());
                replayed.replay(record);
            }
            prop_assert_eq!(groups.describe(G), replayed.describe(G));
        }
    }
}
