//! ACL checks of the admin APIs for records, groups and log dirs, as Kafka makes them:
//! DeleteRecords needs Delete on the topic, DeleteGroups Delete on the group, OffsetDelete Delete
//! on the group and Read on each topic, DescribeLogDirs and ListPartitionReassignments Describe on
//! the cluster, ElectLeaders and AlterPartitionReassignments Alter on the cluster. The principal (`User:ANONYMOUS` on PLAINTEXT)
//! has none of these on the cluster.

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_protocol::error_code;
use skiff_tests::{create_topic, produce_records, topic_name, TestBroker};

const ACLS: &str = "\
allow User:ANONYMOUS create cluster
allow User:ANONYMOUS write topic:*
allow User:ANONYMOUS delete topic:a-1
allow User:ANONYMOUS read topic:a-1
allow User:ANONYMOUS read group:g1
allow User:ANONYMOUS delete group:g1
";

fn group(text: &str) -> GroupId {
    GroupId(StrBytes::from_string(text.to_owned()))
}

fn offset_delete(group_id: &str, topics: &[&str]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(group(group_id))
        .with_topics(
            topics
                .iter()
                .map(|topic| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])
                })
                .collect(),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_apis_check_kafkas_acls() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, ACLS)?;
    let file = format!("skiff.acl.file={}", acl_path.display());
    let broker = TestBroker::start(&[&file]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    for topic in ["a-1", "b"] {
        create_topic(&mut client, topic, &[]).await?;
        produce_records(&mut client, topic, 10, 5, 10).await?;
    }

    let request = DeleteRecordsRequest::default().with_topics(
        ["a-1", "b"]
            .iter()
            .map(|topic| {
                DeleteRecordsTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![DeleteRecordsPartition::default().with_offset(3)])
            })
            .collect(),
    );
    let response: DeleteRecordsResponse =
        client.request(ApiKey::DeleteRecords, 2, &request).await?;
    let answers: Vec<(i16, i64)> = response
        .topics
        .iter()
        .map(|topic| {
            (
                topic.partitions[0].error_code,
                topic.partitions[0].low_watermark,
            )
        })
        .collect();
    assert_eq!(
        answers,
        [(0, 3), (error_code::TOPIC_AUTHORIZATION_FAILED, -1)]
    );

    // Without Describe on the cluster: nothing listed, and the error where the version has it.
    for version in [0, 4] {
        let response: DescribeLogDirsResponse = client
            .request(
                ApiKey::DescribeLogDirs,
                version,
                &DescribeLogDirsRequest::default().with_topics(None),
            )
            .await?;
        assert!(response.results.is_empty());
        let expected = if version >= 3 {
            error_code::CLUSTER_AUTHORIZATION_FAILED
        } else {
            0
        };
        assert_eq!(response.error_code, expected, "DescribeLogDirs v{version}");
    }
    let response: ListPartitionReassignmentsResponse = client
        .request(
            ApiKey::ListPartitionReassignments,
            0,
            &ListPartitionReassignmentsRequest::default().with_topics(None),
        )
        .await?;
    assert_eq!(
        response.error_code,
        error_code::CLUSTER_AUTHORIZATION_FAILED
    );

    // ElectLeaders without Alter on the cluster: refused at the top level (from v1) and on
    // every partition named, whatever the partition.
    for version in [0, 2] {
        let request = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
            kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                .with_topic(topic_name("a-1"))
                .with_partitions(vec![0, 9]),
        ]));
        let response: ElectLeadersResponse = client
            .request(ApiKey::ElectLeaders, version, &request)
            .await?;
        let expected = if version >= 1 {
            error_code::CLUSTER_AUTHORIZATION_FAILED
        } else {
            0
        };
        assert_eq!(response.error_code, expected, "ElectLeaders v{version}");
        let codes: Vec<i16> = response.replica_election_results[0]
            .partition_result
            .iter()
            .map(|partition| partition.error_code)
            .collect();
        assert_eq!(codes, [error_code::CLUSTER_AUTHORIZATION_FAILED; 2]);
    }

    // AlterPartitionReassignments without Alter on the cluster: refused at the top level and on
    // every partition named.
    {
        use kafka_protocol::messages::alter_partition_reassignments_request::{
            ReassignablePartition, ReassignableTopic,
        };
        let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
            ReassignableTopic::default()
                .with_name(topic_name("a-1"))
                .with_partitions(vec![
                    ReassignablePartition::default().with_replicas(Some(vec![BrokerId(1)])),
                    ReassignablePartition::default().with_partition_index(9),
                ]),
        ]);
        let response: AlterPartitionReassignmentsResponse = client
            .request(ApiKey::AlterPartitionReassignments, 0, &request)
            .await?;
        assert_eq!(
            response.error_code,
            error_code::CLUSTER_AUTHORIZATION_FAILED
        );
        let codes: Vec<i16> = response.responses[0]
            .partitions
            .iter()
            .map(|partition| partition.error_code)
            .collect();
        assert_eq!(codes, [error_code::CLUSTER_AUTHORIZATION_FAILED; 2]);
    }

    // g1 gets a standalone commit on a-1 (Read on g1 and a-1).
    let commit = OffsetCommitRequest::default()
        .with_group_id(group("g1"))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("a-1"))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(4)
            ])]);
    let committed: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 2, &commit).await?;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    // OffsetDelete: Delete on the group first, then Read per topic.
    let response: OffsetDeleteResponse = client
        .request(ApiKey::OffsetDelete, 0, &offset_delete("g2", &["a-1"]))
        .await?;
    assert_eq!(response.error_code, error_code::GROUP_AUTHORIZATION_FAILED);
    assert!(response.topics.is_empty());
    let response: OffsetDeleteResponse = client
        .request(ApiKey::OffsetDelete, 0, &offset_delete("g1", &["a-1", "b"]))
        .await?;
    assert_eq!(response.error_code, 0);
    let codes: Vec<i16> = response
        .topics
        .iter()
        .map(|topic| topic.partitions[0].error_code)
        .collect();
    assert_eq!(codes, [0, error_code::TOPIC_AUTHORIZATION_FAILED]);

    // DeleteGroups: Delete per group; g1 (emptied by OffsetDelete) is still there to delete.
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group("g1"), group("g2")]);
    let response: DeleteGroupsResponse = client.request(ApiKey::DeleteGroups, 2, &request).await?;
    let results: Vec<(String, i16)> = response
        .results
        .iter()
        .map(|result| (result.group_id.0.as_str().to_owned(), result.error_code))
        .collect();
    assert_eq!(
        results,
        [
            ("g1".to_owned(), 0),
            ("g2".to_owned(), error_code::GROUP_AUTHORIZATION_FAILED)
        ]
    );
    broker.stop().await;
    Ok(())
}
