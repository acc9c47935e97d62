use super::*;
use proptest::prelude::*;

fn topic(n: u8) -> TopicId {
    TopicId([n; 16])
}

fn table(counts: &[i32]) -> BTreeMap<TopicId, TopicSpec> {
    counts
        .iter()
        .enumerate()
        .map(|(index, partitions)| {
            let id = topic(u8::try_from(index).unwrap());
            let name = format!("t{index}");
            (
                id,
                TopicSpec {
                    name,
                    partitions: *partitions,
                },
            )
        })
        .collect()
}

fn member(id: &str, topics: &[u8]) -> MemberSpec {
    MemberSpec {
        member_id: id.into(),
        topics: topics.iter().map(|t| topic(*t)).collect(),
        ..MemberSpec::default()
    }
}

/// Every subscribed partition assigned exactly once, only to a subscriber of its topic.
fn check_cover(
    members: &[MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
    result: &BTreeMap<String, Assignment>,
) {
    let mut seen = BTreeSet::new();
    for member in members {
        let assignment = &result[&member.member_id];
        for (topic, partitions) in assignment {
            assert!(
                member.topics.contains(topic),
                "{} not subscribed to {topic:?}",
                member.member_id
            );
            for partition in partitions {
                assert!(*partition < topics[topic].partitions);
                assert!(
                    seen.insert((*topic, *partition)),
                    "{topic:?}-{partition} twice"
                );
            }
        }
    }
    let subscribed: BTreeSet<TopicId> = members.iter().flat_map(|m| m.topics.clone()).collect();
    for topic in subscribed {
        for partition in 0..topics[&topic].partitions {
            assert!(
                seen.contains(&(topic, partition)),
                "{topic:?}-{partition} unassigned"
            );
        }
    }
}

fn counts(result: &BTreeMap<String, Assignment>) -> Vec<usize> {
    result
        .values()
        .map(crate::consumer::partition_count)
        .collect()
}

#[test]
fn uniform_homogeneous_keeps_owners_and_balances() {
    let topics = table(&[4, 3]);
    let mut members = vec![member("a", &[0, 1]), member("b", &[0, 1])];
    let first = assign(AssignorKind::Uniform, &members, &topics).unwrap();
    check_cover(&members, &topics, &first);
    assert_eq!(counts(&first), vec![4, 3]);
    // A third member joins: the two keep what they can, the newcomer takes the rest.
    members[0].current = first["a"].clone();
    members[1].current = first["b"].clone();
    members.push(member("c", &[0, 1]));
    let second = assign(AssignorKind::Uniform, &members, &topics).unwrap();
    check_cover(&members, &topics, &second);
    for id in ["a", "b"] {
        for (topic, partitions) in &second[id] {
            assert!(
                partitions.is_subset(&first[id][topic]),
                "{id} moved partitions"
            );
        }
    }
    let mut sizes = counts(&second);
    sizes.sort();
    assert_eq!(sizes, vec![2, 2, 3]);
}

#[test]
fn range_is_co_partitioned_and_orders_static_members_first() {
    let topics = table(&[3, 3]);
    let mut members = vec![member("a", &[0, 1]), member("b", &[0, 1])];
    members[1].instance_id = Some("i".into());
    let result = assign(AssignorKind::Range, &members, &topics).unwrap();
    check_cover(&members, &topics, &result);
    let expected_b: Assignment = [(topic(0), [0, 1].into()), (topic(1), [0, 1].into())].into();
    assert_eq!(result["b"], expected_b, "the static member comes first");
    assert_eq!(
        result["a"],
        [(topic(0), [2].into()), (topic(1), [2].into())].into()
    );
}

#[test]
fn too_large_and_unknown_topics_are_errors() {
    let topics = table(&[i32::MAX]);
    let members: Vec<MemberSpec> = (0..100).map(|i| member(&format!("m{i}"), &[0])).collect();
    assert!(matches!(
        assign(AssignorKind::Uniform, &members, &topics),
        Err(AssignorError::TooLarge { .. })
    ));
    let members = vec![member("a", &[9])];
    assert!(matches!(
        assign(AssignorKind::Range, &members, &table(&[1])),
        Err(AssignorError::UnknownTopic { .. })
    ));
}

fn group_strategy() -> impl Strategy<Value = (Vec<i32>, Vec<Vec<u8>>, bool)> {
    (
        proptest::collection::vec(0..12i32, 1..5),
        proptest::collection::vec(proptest::collection::vec(0..5u8, 1..4), 1..8),
        any::<bool>(),
    )
}

fn build(counts: &[i32], subs: &[Vec<u8>], homogeneous: bool) -> Vec<MemberSpec> {
    let topic_count = u8::try_from(counts.len()).unwrap();
    let all: Vec<u8> = (0..topic_count).collect();
    subs.iter()
        .enumerate()
        .map(|(index, topics)| {
            let topics: Vec<u8> = if homogeneous {
                all.clone()
            } else {
                topics.iter().map(|t| t % topic_count).collect()
            };
            member(&format!("m{index}"), &topics)
        })
        .collect()
}

proptest! {
    #[test]
    fn assignors_cover_once_balance_and_stick(
        (counts, subs, homogeneous) in group_strategy(),
        range in any::<bool>(),
        churn in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let kind = if range { AssignorKind::Range } else { AssignorKind::Uniform };
        let topics = table(&counts);
        let mut members = build(&counts, &subs, homogeneous);
        // Arbitrary (even overlapping or stale) current assignments must not break the rules.
        for (index, byte) in churn.iter().enumerate() {
            let m = index % members.len();
            let t = topic(byte % 6);
            members[m].current.entry(t).or_default().insert(i32::from(byte / 6) % 14);
        }
        let first = assign(kind, &members, &topics).unwrap();
        check_cover(&members, &topics, &first);
        if homogeneous && !range {
            let sizes = counts_of(&first);
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(max - min <= 1, "unbalanced {sizes:?}");
        }
        if !range {
            // No member holds a partition that a fellow subscriber two partitions lighter could take.
            let load: BTreeMap<&str, usize> =
                first.iter().map(|(id, a)| (id.as_str(), crate::consumer::partition_count(a))).collect();
            for member in &members {
                for topic in first[&member.member_id].keys() {
                    for other in members.iter().filter(|m| m.topics.contains(topic)) {
                        prop_assert!(
                            load[member.member_id.as_str()] <= load[other.member_id.as_str()] + 1,
                            "{} could give {topic:?} to {}", member.member_id, other.member_id
                        );
                    }
                }
            }
        }
        for member in &mut members {
            member.current = first[&member.member_id].clone();
        }
        let second = assign(kind, &members, &topics).unwrap();
        prop_assert_eq!(&first, &second, "an unchanged group keeps its assignment");
    }
}

fn counts_of(result: &BTreeMap<String, Assignment>) -> Vec<usize> {
    counts(result)
}
