//! ACL authorization at the wire level, against a PLAINTEXT broker whose connections are all
//! `User:ANONYMOUS`: it may create topics, write the `a-` topics but not `b`, read `a-1`, use group
//! `g1` but not `g2`. Refused topics and groups get Kafka's error codes, Metadata hides what may
//! not be described, and a rewritten ACL file takes effect without a restart (a broken one does
//! not).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::Compression;
use skiff_tests::{batch, create_topic, fetch, topic_name, TestBroker};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

const ACLS: &str = "\
# the test principal
allow User:ANONYMOUS create cluster
allow User:ANONYMOUS write topic:prefixed:a-
allow User:ANONYMOUS read topic:a-1
allow User:ANONYMOUS read group:g1
allow User:ops all topic:*
";

fn group(text: &str) -> GroupId {
    GroupId(StrBytes::from_string(text.to_owned()))
}

async fn start(acl_path: &Path, extra: &[&str]) -> anyhow::Result<TestBroker> {
    let file = format!("skiff.acl.file={}", acl_path.display());
    let mut overrides = vec![file.as_str(), "skiff.acl.reload.interval.ms=100"];
    overrides.extend_from_slice(extra);
    TestBroker::start(&overrides).await
}

/// Produce v3 of one batch to partition 0 of each topic; the error code per topic.
async fn produce_codes(client: &mut Connection, topics: &[&str]) -> anyhow::Result<Vec<i16>> {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(
            topics
                .iter()
                .map(|topic| {
                    TopicProduceData::default()
                        .with_name(topic_name(topic))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(batch(0, 2, 10, Compression::None))))])
                })
                .collect(),
        );
    let response: ProduceResponse = client.request(ApiKey::Produce, 3, &request).await?;
    Ok(response
        .responses
        .iter()
        .map(|topic| topic.partition_responses[0].error_code)
        .collect())
}

async fn metadata(
    client: &mut Connection,
    topics: Option<&[&str]>,
) -> anyhow::Result<MetadataResponse> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let request = MetadataRequest::default()
        .with_topics(topics.map(|topics| {
            topics
                .iter()
                .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                .collect()
        }))
        .with_allow_auto_topic_creation(false);
    client.request(ApiKey::Metadata, 9, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_checked_per_api_with_kafkas_codes() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, ACLS)?;
    let broker = start(&acl_path, &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    for topic in ["a-1", "a-2", "b"] {
        create_topic(&mut client, topic, &[]).await?;
    }

    // Produce: Write on a- topics only; a refused topic is refused even if it does not exist.
    assert_eq!(
        produce_codes(&mut client, &["a-1", "b", "nope"]).await?,
        [0, TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED]
    );
    // Auto-creation on produce needs Create (granted here on the cluster).
    assert_eq!(produce_codes(&mut client, &["a-new"]).await?, [0]);

    // Fetch: Read on a-1 only; the refused partition is an errored one with no records, in the
    // same response as data from the allowed one, at a zero-copy and a converting version.
    for version in [11, 2] {
        let mut request = fetch_request("a-1", 0, 0, 1 << 20, 1 << 20, 0);
        let mut refused_topic = request.topics[0].clone();
        refused_topic.topic = topic_name("b");
        request.topics.push(refused_topic);
        let mut other = request.topics[0].clone();
        other.topic = topic_name("a-2");
        request.topics.push(other);
        let response = fetch(&mut client, version, &request).await?;
        let allowed = &response.responses[0].partitions[0];
        assert_eq!(allowed.error_code, 0, "v{version}");
        assert!(allowed.records.as_ref().is_some_and(|r| !r.is_empty()));
        for refused in &response.responses[1..] {
            let partition = &refused.partitions[0];
            assert_eq!(
                partition.error_code, TOPIC_AUTHORIZATION_FAILED,
                "v{version}"
            );
            assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));
        }
    }

    // Metadata: all topics lists only what may be described (a- topics, by implication of
    // Write); naming b gets 29.
    let all = metadata(&mut client, None).await?;
    let mut names: Vec<String> = all
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref().map(|name| name.to_string()))
        .collect();
    names.sort();
    assert_eq!(names, ["a-1", "a-2", "a-new"]);
    let named = metadata(&mut client, Some(&["a-1", "b"])).await?;
    assert_eq!(named.topics[0].error_code, 0);
    assert_eq!(named.topics[1].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(named.topics[1].partitions.is_empty());

    // ListOffsets: Describe.
    let list = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            ["a-1", "b"]
                .iter()
                .map(|topic| {
                    ListOffsetsTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])
                })
                .collect(),
        );
    let listed: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 1, &list).await?;
    assert_eq!(listed.topics[0].partitions[0].error_code, 0);
    assert_eq!(listed.topics[0].partitions[0].offset, 2);
    assert_eq!(
        listed.topics[1].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );

    // DeleteTopics: Delete; DescribeConfigs: DescribeConfigs on topics, on the cluster for brokers.
    let delete = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic_name("b")])
        .with_timeout_ms(5_000);
    let deleted: DeleteTopicsResponse = client.request(ApiKey::DeleteTopics, 1, &delete).await?;
    assert_eq!(deleted.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let describe = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("a-1")),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("0")),
    ]);
    let described: DescribeConfigsResponse = client
        .request(ApiKey::DescribeConfigs, 1, &describe)
        .await?;
    assert_eq!(described.results[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        described.results[1].error_code,
        CLUSTER_AUTHORIZATION_FAILED
    );

    // CreateTopics: Create on the cluster is granted here; it was used above.
    assert!(
        broker
            .metrics
            .authorization_failures(ApiKey::Produce as i16)
            >= 2
    );
    assert!(broker.metrics.authorization_failures(ApiKey::Fetch as i16) >= 4);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_checked_per_api_with_kafkas_codes() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, ACLS)?;
    let broker = start(&acl_path, &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "a-1", &[]).await?;
    create_topic(&mut client, "b", &[]).await?;

    // FindCoordinator: Describe on the group (implied by Read on g1).
    for (name, code) in [("g1", 0), ("g2", GROUP_AUTHORIZATION_FAILED)] {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str(name));
        let response: FindCoordinatorResponse =
            client.request(ApiKey::FindCoordinator, 1, &request).await?;
        assert_eq!(response.error_code, code, "{name}");
    }
    let batched = FindCoordinatorRequest::default().with_coordinator_keys(vec![
        StrBytes::from_static_str("g2"),
        StrBytes::from_static_str("g1"),
    ]);
    let response: FindCoordinatorResponse =
        client.request(ApiKey::FindCoordinator, 4, &batched).await?;
    let mut codes: Vec<(String, i16)> = response
        .coordinators
        .iter()
        .map(|coordinator| (coordinator.key.to_string(), coordinator.error_code))
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            ("g1".to_owned(), 0),
            ("g2".to_owned(), GROUP_AUTHORIZATION_FAILED)
        ]
    );

    // JoinGroup, Heartbeat: Read on the group.
    let join = |name: &str| {
        JoinGroupRequest::default()
            .with_group_id(group(name))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(Bytes::from_static(b"meta")),
            ])
    };
    for version in [1, 7] {
        let refused: JoinGroupResponse = client
            .request(ApiKey::JoinGroup, version, &join("g2"))
            .await?;
        assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    }
    let heartbeat = HeartbeatRequest::default().with_group_id(group("g2"));
    let refused: HeartbeatResponse = client.request(ApiKey::Heartbeat, 0, &heartbeat).await?;
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);

    // OffsetCommit: the group first (every partition 30), then each topic (29 for b).
    let commit = |name: &str| {
        OffsetCommitRequest::default()
            .with_group_id(group(name))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                ["a-1", "b"]
                    .iter()
                    .map(|topic| {
                        OffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1)])
                    })
                    .collect(),
            )
    };
    let refused: OffsetCommitResponse = client
        .request(ApiKey::OffsetCommit, 2, &commit("g2"))
        .await?;
    for topic in &refused.topics {
        assert_eq!(topic.partitions[0].error_code, GROUP_AUTHORIZATION_FAILED);
    }
    let committed: OffsetCommitResponse = client
        .request(ApiKey::OffsetCommit, 2, &commit("g1"))
        .await?;
    let codes: Vec<(String, i16)> = committed
        .topics
        .iter()
        .map(|topic| (topic.name.to_string(), topic.partitions[0].error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("a-1".to_owned(), 0),
            ("b".to_owned(), TOPIC_AUTHORIZATION_FAILED)
        ]
    );

    // OffsetFetch: Describe on the group (top-level 30 from v2), on named topics (29), and an
    // all-topics fetch leaves out what may not be described.
    let offset_fetch = |name: &str, topics: Option<&[&str]>| {
        OffsetFetchRequest::default()
            .with_group_id(group(name))
            .with_topics(topics.map(|topics| {
                topics
                    .iter()
                    .map(|topic| {
                        OffsetFetchRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(vec![0])
                    })
                    .collect()
            }))
    };
    let refused: OffsetFetchResponse = client
        .request(ApiKey::OffsetFetch, 3, &offset_fetch("g2", Some(&["a-1"])))
        .await?;
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    let refused: OffsetFetchResponse = client
        .request(ApiKey::OffsetFetch, 1, &offset_fetch("g2", Some(&["a-1"])))
        .await?;
    assert_eq!(
        refused.topics[0].partitions[0].error_code,
        GROUP_AUTHORIZATION_FAILED
    );
    let fetched: OffsetFetchResponse = client
        .request(
            ApiKey::OffsetFetch,
            3,
            &offset_fetch("g1", Some(&["a-1", "b"])),
        )
        .await?;
    let codes: Vec<(String, i16, i64)> = fetched
        .topics
        .iter()
        .map(|topic| {
            let partition = &topic.partitions[0];
            (
                topic.name.to_string(),
                partition.error_code,
                partition.committed_offset,
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("a-1".to_owned(), 0, 1),
            ("b".to_owned(), TOPIC_AUTHORIZATION_FAILED, -1)
        ]
    );
    let all: OffsetFetchResponse = client
        .request(ApiKey::OffsetFetch, 3, &offset_fetch("g1", None))
        .await?;
    assert_eq!(all.error_code, 0);
    assert!(all.topics.iter().all(|topic| topic.name.as_str() != "b"));

    // DescribeGroups: 30 for g2 only; ListGroups: without Describe on the cluster, only g1.
    let describe = DescribeGroupsRequest::default().with_groups(vec![group("g1"), group("g2")]);
    let described: DescribeGroupsResponse =
        client.request(ApiKey::DescribeGroups, 0, &describe).await?;
    let codes: Vec<(String, i16)> = described
        .groups
        .iter()
        .map(|group| (group.group_id.to_string(), group.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("g1".to_owned(), 0),
            ("g2".to_owned(), GROUP_AUTHORIZATION_FAILED)
        ]
    );
    let listed: ListGroupsResponse = client
        .request(ApiKey::ListGroups, 0, &ListGroupsRequest::default())
        .await?;
    assert!(listed
        .groups
        .iter()
        .all(|group| group.group_id.as_str() == "g1"));
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_file_applies_without_restart_and_a_broken_one_is_ignored() -> anyhow::Result<()>
{
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, ACLS)?;
    let broker = start(&acl_path, &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "b", &[]).await?;
    assert_eq!(
        produce_codes(&mut client, &["b"]).await?,
        [TOPIC_AUTHORIZATION_FAILED]
    );
    // Idempotent producers need IdempotentWrite on the cluster or Write on some topic (a-).
    let init = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    let response: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 1, &init).await?;
    assert_eq!(response.error_code, 0);

    let wait_for = |expected: i16| {
        let address = broker.bootstrap();
        async move {
            let mut client = Connection::connect(&address).await?;
            for _ in 0..100 {
                if produce_codes(&mut client, &["b"]).await? == [expected] {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            anyhow::bail!("produce to b never answered {expected}")
        }
    };
    std::fs::write(
        &acl_path,
        "allow User:ANONYMOUS write topic:b\nallow User:ANONYMOUS describe topic:b\n",
    )?;
    wait_for(0).await?;
    // Now no a- topic is writable and IdempotentWrite is missing... but b is: still allowed.
    let response: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 1, &init).await?;
    assert_eq!(response.error_code, 0);

    // A broken file is logged and ignored: b stays writable for several reload intervals.
    std::fs::write(&acl_path, "allow User:ANONYMOUS wrte topic:b\n")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(produce_codes(&mut client, &["b"]).await?, [0]);

    // A valid file again: the deny wins over the allow.
    std::fs::write(
        &acl_path,
        "allow User:ANONYMOUS write topic:*\ndeny User:* write topic:b\n",
    )?;
    wait_for(TOPIC_AUTHORIZATION_FAILED).await?;
    // Write on some topic (the wildcard) still lets InitProducerId through; an empty file not.
    std::fs::write(&acl_path, "# nothing\n")?;
    let mut refused = false;
    for _ in 0..100 {
        let response: InitProducerIdResponse =
            client.request(ApiKey::InitProducerId, 1, &init).await?;
        if response.error_code == CLUSTER_AUTHORIZATION_FAILED {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "InitProducerId was never refused");
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn super_users_and_allow_everyone_and_bad_start_up_files() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, "allow User:bob read topic:bobs\n")?;
    // ANONYMOUS as a super user: everything, despite no ACL.
    let broker = start(&acl_path, &["super.users=User:ANONYMOUS"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "bobs", &[]).await?;
    assert_eq!(produce_codes(&mut client, &["bobs"]).await?, [0]);
    broker.stop().await;

    // allow.everyone.if.no.acl.found: a topic no ACL names is open, bobs (named) is not.
    let broker = start(&acl_path, &["allow.everyone.if.no.acl.found=true"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "open", &[]).await?;
    create_topic(&mut client, "bobs", &[]).await?;
    assert_eq!(
        produce_codes(&mut client, &["open", "bobs"]).await?,
        [0, TOPIC_AUTHORIZATION_FAILED]
    );
    broker.stop().await;

    // A file that does not parse stops the start, naming the key, line and column.
    std::fs::write(
        &acl_path,
        "allow User:a read topic:t\nallow User:a read topik:t\n",
    )?;
    let error = match start(&acl_path, &[]).await {
        Ok(broker) => {
            broker.stop().await;
            anyhow::bail!("a broken ACL file was accepted at start")
        }
        Err(error) => error.to_string(),
    };
    assert!(error.contains("skiff.acl.file"), "{error}");
    assert!(error.contains("line 2, column 19"), "{error}");
    let error = match start(&acl_path, &["super.users=alice"]).await {
        Ok(broker) => {
            broker.stop().await;
            anyhow::bail!("a bad super.users was accepted")
        }
        Err(error) => error.to_string(),
    };
    assert!(error.contains("super.users"), "{error}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_and_config_changes_are_checked_with_kafkas_codes() -> anyhow::Result<()> {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::incremental_alter_configs_request as incremental;
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(
        &acl_path,
        "allow User:ANONYMOUS create cluster\n\
         allow User:ANONYMOUS alter topic:a-1\n\
         allow User:ANONYMOUS alter-configs topic:a-2\n",
    )?;
    let broker = start(&acl_path, &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    for topic in ["a-1", "a-2"] {
        create_topic(&mut client, topic, &[]).await?;
    }

    // CreatePartitions: Alter on the topic.
    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(
            ["a-1", "a-2"]
                .iter()
                .map(|topic| {
                    CreatePartitionsTopic::default()
                        .with_name(topic_name(topic))
                        .with_count(2)
                        .with_assignments(None)
                })
                .collect(),
        );
    let grown: CreatePartitionsResponse =
        client.request(ApiKey::CreatePartitions, 1, &grow).await?;
    let codes: Vec<i16> = grown
        .results
        .iter()
        .map(|result| result.error_code)
        .collect();
    assert_eq!(codes, [0, TOPIC_AUTHORIZATION_FAILED]);

    // IncrementalAlterConfigs and AlterConfigs: AlterConfigs on the topic, on the cluster for a
    // broker.
    let resources = [(2i8, "a-2"), (2, "a-1"), (4, "1")];
    let alter = IncrementalAlterConfigsRequest::default().with_resources(
        resources
            .iter()
            .map(|(resource_type, name)| {
                incremental::AlterConfigsResource::default()
                    .with_resource_type(*resource_type)
                    .with_resource_name(StrBytes::from_string((*name).to_owned()))
                    .with_configs(vec![incremental::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_value(Some(StrBytes::from_static_str("1000")))])
            })
            .collect(),
    );
    let altered: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &alter)
        .await?;
    let codes: Vec<i16> = altered
        .responses
        .iter()
        .map(|result| result.error_code)
        .collect();
    assert_eq!(
        codes,
        [0, TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED]
    );
    use kafka_protocol::messages::alter_configs_request as legacy;
    let alter = AlterConfigsRequest::default().with_resources(
        resources
            .iter()
            .map(|(resource_type, name)| {
                legacy::AlterConfigsResource::default()
                    .with_resource_type(*resource_type)
                    .with_resource_name(StrBytes::from_string((*name).to_owned()))
            })
            .collect(),
    );
    let altered: AlterConfigsResponse = client.request(ApiKey::AlterConfigs, 0, &alter).await?;
    let codes: Vec<i16> = altered
        .responses
        .iter()
        .map(|result| result.error_code)
        .collect();
    assert_eq!(
        codes,
        [0, TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED]
    );
    broker.stop().await;
    Ok(())
}
