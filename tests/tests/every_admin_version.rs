//! The admin APIs for records, groups and log dirs (DeleteRecords, DescribeLogDirs, DeleteGroups,
//! OffsetDelete, ListPartitionReassignments) answer at every advertised version with what Kafka
//! answers: the low watermark after DeleteRecords and the earliest offset ListOffsets and Fetch
//! then see (also after a restart), the one log dir with its partition sizes, deleted groups and
//! offsets gone from OffsetFetch and ListGroups, and no reassignment on one node;
//! AlterPartitionReassignments on one node (a cluster of one broker) takes a reassignment to that
//! broker and refuses any other target.

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::error_code;
use skiff_tests::{advertised, create_topic, fetch, produce_records, topic_name, TestBroker};

fn group_id(text: &str) -> GroupId {
    GroupId(StrBytes::from_string(text.to_owned()))
}

async fn delete_records(
    client: &mut Connection,
    version: i16,
    topic: &str,
    offset: i64,
) -> anyhow::Result<(i16, i64)> {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let response: DeleteRecordsResponse = client
        .request(ApiKey::DeleteRecords, version, &request)
        .await?;
    let partition = &response.topics[0].partitions[0];
    Ok((partition.error_code, partition.low_watermark))
}

async fn earliest_offset(client: &mut Connection, topic: &str) -> anyhow::Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                ListOffsetsPartition::default().with_timestamp(-2)
            ])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 7, &request).await?;
    Ok(response.topics[0].partitions[0].offset)
}

/// A standalone commit (no member) of `offset` for partition 0 of `topic`.
async fn commit(
    client: &mut Connection,
    group: &str,
    topic: &str,
    offset: i64,
) -> anyhow::Result<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(offset)
            ])]);
    let response: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 2, &request).await?;
    anyhow::ensure!(response.topics[0].partitions[0].error_code == 0);
    Ok(())
}

async fn committed(client: &mut Connection, group: &str, topic: &str) -> anyhow::Result<i64> {
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![0])]));
    let response: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 2, &request).await?;
    Ok(response.topics[0].partitions[0].committed_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_admin_api_version_answers() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let log_dirs = format!("log.dirs={}", data.path().display());
    let broker = TestBroker::start(&[&log_dirs]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, "trimmed", &[]).await?;
    produce_records(&mut client, "trimmed", 100, 10, 20).await?;

    // DeleteRecords: each version raises the log start by 10; above the end, or negative other
    // than −1, is OFFSET_OUT_OF_RANGE; an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
    let mut expected_start = 0;
    for version in advertised(&versions, ApiKey::DeleteRecords) {
        expected_start += 10;
        let answer = delete_records(&mut client, version, "trimmed", expected_start).await?;
        assert_eq!(answer, (0, expected_start), "DeleteRecords v{version}");
        assert_eq!(
            delete_records(&mut client, version, "trimmed", 101).await?,
            (error_code::OFFSET_OUT_OF_RANGE, -1)
        );
        assert_eq!(
            delete_records(&mut client, version, "trimmed", -2).await?.0,
            error_code::OFFSET_OUT_OF_RANGE
        );
        assert_eq!(
            delete_records(&mut client, version, "absent", 1).await?.0,
            error_code::UNKNOWN_TOPIC_OR_PARTITION
        );
        // Below the current start: nothing moves, the answer is the current start.
        assert_eq!(
            delete_records(&mut client, version, "trimmed", 1).await?,
            (0, expected_start)
        );
    }
    assert_eq!(
        earliest_offset(&mut client, "trimmed").await?,
        expected_start
    );
    let below = fetch(
        &mut client,
        12,
        &fetch_request("trimmed", 0, 0, 1 << 20, 1 << 20, 0),
    )
    .await?;
    let partition = &below.responses[0].partitions[0];
    assert_eq!(partition.error_code, error_code::OFFSET_OUT_OF_RANGE);
    let at_start = fetch(
        &mut client,
        12,
        &fetch_request("trimmed", 0, expected_start, 1 << 20, 1 << 20, 0),
    )
    .await?;
    let partition = &at_start.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.log_start_offset, expected_start);

    // DescribeLogDirs: the one log dir, with the partition and its bytes; v4 adds disk space.
    let canonical = std::fs::canonicalize(data.path())?;
    for version in advertised(&versions, ApiKey::DescribeLogDirs) {
        for topics in [
            None,
            Some(vec![DescribableLogDirTopic::default()
                .with_topic(topic_name("trimmed"))
                .with_partitions(vec![0, 7])]),
        ] {
            let request = DescribeLogDirsRequest::default().with_topics(topics);
            let response: DescribeLogDirsResponse = client
                .request(ApiKey::DescribeLogDirs, version, &request)
                .await?;
            assert_eq!(response.error_code, 0);
            let [dir] = &response.results[..] else {
                panic!("DescribeLogDirs v{version}: {response:?}")
            };
            assert_eq!(dir.error_code, 0);
            assert_eq!(dir.log_dir.as_str(), canonical.display().to_string());
            let topic = dir
                .topics
                .iter()
                .find(|topic| topic.name.0.as_str() == "trimmed")
                .expect("the topic is described");
            let [partition] = &topic.partitions[..] else {
                panic!("only partition 0 exists: {topic:?}")
            };
            assert_eq!(partition.partition_index, 0);
            assert!(partition.partition_size > 0);
            assert_eq!((partition.offset_lag, partition.is_future_key), (0, false));
            if version >= 4 {
                assert!(dir.total_bytes > 0 && dir.usable_bytes >= 0);
                assert!(dir.usable_bytes <= dir.total_bytes);
            } else {
                assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1));
            }
        }
    }

    // ListPartitionReassignments: none on one node, also for a named (or unknown) topic.
    for version in advertised(&versions, ApiKey::ListPartitionReassignments) {
        for topics in [
            None,
            Some(vec![ListPartitionReassignmentsTopics::default()
                .with_name(topic_name("trimmed"))
                .with_partition_indexes(vec![0])]),
            Some(vec![ListPartitionReassignmentsTopics::default()
                .with_name(topic_name("absent"))
                .with_partition_indexes(vec![0])]),
        ] {
            let request = ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(topics);
            let response: ListPartitionReassignmentsResponse = client
                .request(ApiKey::ListPartitionReassignments, version, &request)
                .await?;
            assert_eq!(response.error_code, 0);
            assert!(response.topics.is_empty());
        }
    }

    // OffsetDelete: an offset of an Empty group goes.
    for version in advertised(&versions, ApiKey::OffsetDelete) {
        let group = format!("offsets-v{version}");
        commit(&mut client, &group, "trimmed", 42).await?;
        let request = OffsetDeleteRequest::default()
            .with_group_id(group_id(&group))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name("trimmed"))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ]),
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name("absent"))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ]),
            ]);
        let response: OffsetDeleteResponse = client
            .request(ApiKey::OffsetDelete, version, &request)
            .await?;
        assert_eq!(response.error_code, 0, "OffsetDelete v{version}");
        assert_eq!(response.topics[0].partitions[0].error_code, 0);
        assert_eq!(
            response.topics[1].partitions[0].error_code,
            error_code::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(committed(&mut client, &group, "trimmed").await?, -1);
    }

    // DeleteGroups: an Empty group with offsets goes; an unknown one is GROUP_ID_NOT_FOUND.
    for version in advertised(&versions, ApiKey::DeleteGroups) {
        let group = format!("deleted-v{version}");
        commit(&mut client, &group, "trimmed", 7).await?;
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![group_id(&group), group_id("nope")]);
        let response: DeleteGroupsResponse = client
            .request(ApiKey::DeleteGroups, version, &request)
            .await?;
        let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
        assert_eq!(
            codes,
            vec![0, error_code::GROUP_ID_NOT_FOUND],
            "DeleteGroups v{version}"
        );
        assert_eq!(committed(&mut client, &group, "trimmed").await?, -1);
        let listed: ListGroupsResponse = client
            .request(ApiKey::ListGroups, 3, &ListGroupsRequest::default())
            .await?;
        assert!(listed.groups.iter().all(|g| g.group_id.0.as_str() != group));
    }
    // A group deleted before a restart stays deleted after it; the log start stays raised.
    commit(&mut client, "kept", "trimmed", 9).await?;
    drop(client);
    broker.stop().await;

    let broker = TestBroker::start(&[&log_dirs]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    assert_eq!(
        earliest_offset(&mut client, "trimmed").await?,
        expected_start
    );
    assert_eq!(committed(&mut client, "kept", "trimmed").await?, 9);
    assert_eq!(committed(&mut client, "deleted-v0", "trimmed").await?, -1);
    assert_eq!(committed(&mut client, "offsets-v0", "trimmed").await?, -1);
    broker.stop().await;
    Ok(())
}

async fn elect_leaders(
    client: &mut Connection,
    version: i16,
    election_type: i8,
    topics: Option<&[(&str, &[i32])]>,
) -> anyhow::Result<ElectLeadersResponse> {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(5_000)
        .with_topic_partitions(topics.map(|topics| {
            topics
                .iter()
                .map(|(name, partitions)| {
                    TopicPartitions::default()
                        .with_topic(topic_name(name))
                        .with_partitions(partitions.to_vec())
                })
                .collect()
        }));
    client
        .request(ApiKey::ElectLeaders, version, &request)
        .await
}

/// Every `(topic, partition, error code)` of a response, in order.
fn election_codes(response: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
    response
        .replica_election_results
        .iter()
        .flat_map(|topic| {
            topic.partition_result.iter().map(|partition| {
                (
                    topic.topic.0.to_string(),
                    partition.partition_id,
                    partition.error_code,
                )
            })
        })
        .collect()
}

/// ElectLeaders on one node (the cluster-mode behaviour is tests/clients/test_elect_leaders.py):
/// every partition has one replica, its preferred leader, so a preferred election is never
/// needed, nor an unclean one; unknown partitions are named as such; with null topic partitions
/// the topics are listed without the partitions that needed nothing; an unknown election type is
/// INVALID_REQUEST (from v1, the first version that carries one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_elect_leaders_version_answers_on_one_node() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let log_dirs = format!("log.dirs={}", data.path().display());
    let broker = TestBroker::start(&[&log_dirs]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, "elected", &[]).await?;
    let not_needed = error_code::ELECTION_NOT_NEEDED;
    let mut exercised = 0;
    for version in advertised(&versions, ApiKey::ElectLeaders) {
        exercised += 1;
        let named: &[(&str, &[i32])] = &[("elected", &[0, 7]), ("absent", &[0])];
        let response = elect_leaders(&mut client, version, 0, Some(named)).await?;
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(
            election_codes(&response),
            vec![
                ("elected".to_owned(), 0, not_needed),
                (
                    "elected".to_owned(),
                    7,
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                ),
                (
                    "absent".to_owned(),
                    0,
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                ),
            ],
            "preferred, v{version}"
        );
        let response = elect_leaders(&mut client, version, 0, None).await?;
        assert!(election_codes(&response).is_empty(), "all, v{version}");
        assert!(
            response
                .replica_election_results
                .iter()
                .any(|topic| topic.topic.0.as_str() == "elected"),
            "every topic is listed, v{version}"
        );
        if version >= 1 {
            let named: &[(&str, &[i32])] = &[("elected", &[0])];
            let response = elect_leaders(&mut client, version, 1, Some(named)).await?;
            assert_eq!(
                election_codes(&response),
                vec![("elected".to_owned(), 0, not_needed)],
                "unclean, v{version}"
            );
            let response = elect_leaders(&mut client, version, 5, Some(named)).await?;
            assert_eq!(response.error_code, error_code::INVALID_REQUEST);
            assert_eq!(
                election_codes(&response),
                vec![("elected".to_owned(), 0, error_code::INVALID_REQUEST)],
                "unknown type, v{version}"
            );
        }
    }
    assert_eq!(exercised, 3, "ElectLeaders v0-v2 are advertised");
    Ok(())
}

/// `(topic, partition, replicas)` entries as one AlterPartitionReassignments v0 request; the
/// `(topic, partition, error code)` of each answer, in order.
async fn alter_reassignments(
    client: &mut Connection,
    entries: &[(&str, i32, Option<&[i32]>)],
) -> anyhow::Result<(i16, Vec<(String, i32, i16)>)> {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    let topics = entries
        .iter()
        .map(|(topic, partition, replicas)| {
            ReassignableTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(*partition)
                    .with_replicas(
                        replicas.map(|ids| ids.iter().copied().map(BrokerId).collect()),
                    )])
        })
        .collect();
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(topics);
    let response: AlterPartitionReassignmentsResponse = client
        .request(ApiKey::AlterPartitionReassignments, 0, &request)
        .await?;
    let codes = response
        .responses
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|partition| {
                (
                    topic.name.0.to_string(),
                    partition.partition_index,
                    partition.error_code,
                )
            })
        })
        .collect();
    Ok((response.error_code, codes))
}

/// AlterPartitionReassignments on one node (the cluster behaviour is
/// tests/clients/test_reassignment.py): the embedded store is a cluster of this one broker, so a
/// reassignment to it is taken (and done at once: nothing is listed), one naming another broker
/// is INVALID_REPLICA_ASSIGNMENT, as are an empty list and a duplicate; unknown partitions are
/// named as such, and a cancellation finds nothing in progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_reassignments_answers_on_one_node() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let log_dirs = format!("log.dirs={}", data.path().display());
    let broker = TestBroker::start(&[&log_dirs, "node.id=4"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    assert_eq!(
        advertised(&versions, ApiKey::AlterPartitionReassignments),
        0..=0
    );
    create_topic(&mut client, "moved", &[]).await?;
    let (top, codes) = alter_reassignments(
        &mut client,
        &[
            ("moved", 0, Some(&[4])),
            ("moved", 7, Some(&[4])),
            ("absent", 0, Some(&[4])),
        ],
    )
    .await?;
    assert_eq!(top, 0);
    assert_eq!(
        codes,
        vec![
            ("moved".to_owned(), 0, 0),
            (
                "moved".to_owned(),
                7,
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            ),
            (
                "absent".to_owned(),
                0,
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            ),
        ]
    );
    for replicas in [&[4, 5][..], &[][..], &[4, 4][..]] {
        let (_, codes) = alter_reassignments(&mut client, &[("moved", 0, Some(replicas))]).await?;
        assert_eq!(
            codes,
            vec![(
                "moved".to_owned(),
                0,
                error_code::INVALID_REPLICA_ASSIGNMENT
            )],
            "{replicas:?}"
        );
    }
    let (_, codes) = alter_reassignments(&mut client, &[("moved", 0, None)]).await?;
    assert_eq!(
        codes,
        vec![(
            "moved".to_owned(),
            0,
            error_code::NO_REASSIGNMENT_IN_PROGRESS
        )]
    );
    let request = ListPartitionReassignmentsRequest::default().with_topics(None);
    let response: ListPartitionReassignmentsResponse = client
        .request(ApiKey::ListPartitionReassignments, 0, &request)
        .await?;
    assert!(response.topics.is_empty());
    Ok(())
}
