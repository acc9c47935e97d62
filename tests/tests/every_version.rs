//! Every API the broker advertises answers at every advertised version with a response that a
//! client decodes: a field that a version lacks must never be set (kafka-protocol refuses to encode
//! it, and the broker would have to close the connection).

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::legacy::LegacySetBuilder;
use skiff_protocol::records::{Compression, Magic};
use skiff_tests::{advertised, batch, create_topic, TestBroker};

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

/// A broker, a connection to it, and what it advertises (ApiVersions v0, which every client
/// can send first).
async fn start_and_ask_versions() -> anyhow::Result<(TestBroker, Connection, ApiVersionsResponse)> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    Ok((broker, client, versions))
}

fn legacy_set(magic: Magic) -> Bytes {
    let mut builder = LegacySetBuilder::new(magic, Compression::None, None).expect("builder");
    builder
        .append(0, 1_700_000_000_000, Some(b"key"), Some(b"value"))
        .expect("append");
    builder.finish().expect("finish");
    Bytes::from(builder.into_buffer())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_answers() -> anyhow::Result<()> {
    let (broker, mut client, versions) = start_and_ask_versions().await?;
    assert_eq!(versions.error_code, 0);
    let mut answered = 0usize;

    for version in advertised(&versions, ApiKey::ApiVersions) {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request = request
                .with_client_software_name(StrBytes::from_static_str("skiff-test"))
                .with_client_software_version(StrBytes::from_static_str("1"));
        }
        let response: ApiVersionsResponse = client
            .request(ApiKey::ApiVersions, version, &request)
            .await?;
        assert_eq!(response.error_code, 0, "ApiVersions v{version}");
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::CreateTopics) {
        let topic = format!("created-v{version}");
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(&topic))
                .with_num_partitions(2)
                .with_replication_factor(1)]);
        let response: CreateTopicsResponse = client
            .request(ApiKey::CreateTopics, version, &request)
            .await?;
        assert_eq!(response.topics[0].error_code, 0, "CreateTopics v{version}");
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::Metadata) {
        let topics = if version == 0 {
            Some(vec![])
        } else {
            Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("created-v0")))
            ])
        };
        let request = MetadataRequest::default().with_topics(topics);
        let response: MetadataResponse =
            client.request(ApiKey::Metadata, version, &request).await?;
        assert!(!response.topics.is_empty(), "Metadata v{version}");
        assert!(
            response.topics.iter().all(|topic| topic.error_code == 0),
            "Metadata v{version}"
        );
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::Produce) {
        let records = match version {
            0 | 1 => legacy_set(Magic::V0),
            2 => legacy_set(Magic::V1),
            _ => Bytes::from(batch(0, 3, 10, Compression::None)),
        };
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("created-v0"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records))])]);
        let response: ProduceResponse = client.request(ApiKey::Produce, version, &request).await?;
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0, "Produce v{version}");
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::ListOffsets) {
        for timestamp in [-1i64, -2, 0] {
            let mut partition = ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp);
            if version == 0 {
                partition = partition.with_max_num_offsets(10);
            }
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("created-v0"))
                    .with_partitions(vec![partition])]);
            let response: ListOffsetsResponse = client
                .request(ApiKey::ListOffsets, version, &request)
                .await?;
            let partition = &response.topics[0].partitions[0];
            assert_eq!(
                partition.error_code, 0,
                "ListOffsets v{version} at {timestamp}"
            );
            if version >= 4 {
                // The produces above were stamped with the partition's epoch (0 on a new
                // partition of one broker): the offset found was written in it.
                assert_eq!(
                    partition.leader_epoch, 0,
                    "ListOffsets v{version} at {timestamp}: the epoch of the offset"
                );
            }
        }
        answered += 1;
    }

    // OffsetsForLeaderEpoch: the produces above were stamped with the partition's epoch (from
    // Metadata v7+), so asking that epoch answers it and the log end; from v2 a newer
    // current_leader_epoch is UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH.
    let metadata: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            9,
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("created-v0")))
            ])),
        )
        .await?;
    let epoch = metadata.topics[0].partitions[0].leader_epoch;
    let listed: ListOffsetsResponse = client
        .request(
            ApiKey::ListOffsets,
            1,
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("created-v0"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default().with_timestamp(-1)
                    ])]),
        )
        .await?;
    let log_end = listed.topics[0].partitions[0].offset;
    assert!(
        epoch >= 0 && log_end > 0,
        "epoch {epoch}, log end {log_end}"
    );
    for version in advertised(&versions, ApiKey::OffsetForLeaderEpoch) {
        let currents: &[i32] = if version >= 2 {
            &[-1, epoch, epoch + 1, epoch - 1]
        } else {
            &[-1]
        };
        for current in currents {
            let request = OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![OffsetForLeaderTopic::default()
                    .with_topic(name("created-v0"))
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(*current)
                            .with_leader_epoch(epoch),
                        OffsetForLeaderPartition::default()
                            .with_partition(99)
                            .with_current_leader_epoch(*current)
                            .with_leader_epoch(epoch),
                    ])]);
            let response: OffsetForLeaderEpochResponse = client
                .request(ApiKey::OffsetForLeaderEpoch, version, &request)
                .await?;
            let [answer, unknown] = &response.topics[0].partitions[..] else {
                panic!("OffsetsForLeaderEpoch v{version}: two answers");
            };
            assert_eq!(unknown.error_code, 3, "v{version}: unknown partition");
            let context = format!("OffsetsForLeaderEpoch v{version}, current {current}");
            let expected_error = match *current {
                -1 => 0,
                c if c == epoch + 1 => 75,
                c if c == epoch - 1 => 74,
                _ => 0,
            };
            assert_eq!(answer.error_code, expected_error, "{context}");
            if expected_error == 0 {
                assert_eq!(answer.end_offset, log_end, "{context}");
                if version >= 1 {
                    assert_eq!(answer.leader_epoch, epoch, "{context}");
                }
            } else {
                assert_eq!(
                    (answer.leader_epoch, answer.end_offset),
                    (-1, -1),
                    "{context}"
                );
            }
        }
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::Fetch) {
        let mut request = fetch_request("created-v0", 0, 0, 1 << 20, 1 << 20, 0);
        if version >= 13 {
            let metadata: MetadataResponse = client
                .request(
                    ApiKey::Metadata,
                    12,
                    &MetadataRequest::default().with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(name("created-v0"))),
                    ])),
                )
                .await?;
            request.topics[0].topic_id = metadata.topics[0].topic_id;
            request.topics[0].topic = TopicName::default();
        }
        if version < 3 {
            request.max_bytes = i32::MAX;
        }
        let correlation = client.send(ApiKey::Fetch, version, &request).await?;
        let size = client.read_size().await?;
        let body = client.read_body(size).await?;
        assert_eq!(i32::from_be_bytes(body[..4].try_into()?), correlation);
        let response = skiff_bench::client::decode_fetch(body, version)?;
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0, "Fetch v{version}");
        assert!(
            partition
                .records
                .as_ref()
                .is_some_and(|records| !records.is_empty()),
            "Fetch v{version}"
        );
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::DescribeConfigs) {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("created-v0"))
                .with_configuration_keys(None),
        ]);
        let response: DescribeConfigsResponse = client
            .request(ApiKey::DescribeConfigs, version, &request)
            .await?;
        assert_eq!(
            response.results[0].error_code, 0,
            "DescribeConfigs v{version}"
        );
        assert!(!response.results[0].configs.is_empty());
        answered += 1;
    }

    // Broker resources, with synonyms from v1 and documentation from v3.
    for version in advertised(&versions, ApiKey::DescribeConfigs) {
        let request = DescribeConfigsRequest::default()
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("1"))
                .with_configuration_keys(None)])
            .with_include_synonyms(version >= 1)
            .with_include_documentation(version >= 3);
        let response: DescribeConfigsResponse = client
            .request(ApiKey::DescribeConfigs, version, &request)
            .await?;
        let result = &response.results[0];
        assert_eq!(result.error_code, 0, "DescribeConfigs broker v{version}");
        assert!(result
            .configs
            .iter()
            .any(|config| config.name.as_str() == "log.retention.ms"));
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::CreatePartitions) {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
        // created-v0 has 2 partitions; each version adds one.
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name("created-v0"))
                .with_count(3 + i32::from(version))
                .with_assignments(None)]);
        let response: CreatePartitionsResponse = client
            .request(ApiKey::CreatePartitions, version, &request)
            .await?;
        assert_eq!(
            response.results[0].error_code, 0,
            "CreatePartitions v{version}: {:?}",
            response.results[0]
        );
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::IncrementalAlterConfigs) {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("created-v0"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(format!(
                        "{}",
                        1000 + version
                    ))))]),
        ]);
        let response: IncrementalAlterConfigsResponse = client
            .request(ApiKey::IncrementalAlterConfigs, version, &request)
            .await?;
        assert_eq!(
            response.responses[0].error_code, 0,
            "IncrementalAlterConfigs v{version}: {:?}",
            response.responses[0]
        );
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::AlterConfigs) {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let request =
            AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("created-v0"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("segment.ms"))
                    .with_value(Some(StrBytes::from_string(format!(
                        "{}",
                        60_000 + i32::from(version)
                    ))))])]);
        let response: AlterConfigsResponse = client
            .request(ApiKey::AlterConfigs, version, &request)
            .await?;
        assert_eq!(
            response.responses[0].error_code, 0,
            "AlterConfigs v{version}: {:?}",
            response.responses[0]
        );
        answered += 1;
    }

    for version in advertised(&versions, ApiKey::DeleteTopics) {
        let topic = format!("created-v{version}");
        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                kafka_protocol::messages::delete_topics_request::DeleteTopicState::default()
                    .with_name(Some(name(&topic))),
            ])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
        };
        let response: DeleteTopicsResponse = client
            .request(
                ApiKey::DeleteTopics,
                version,
                &request.with_timeout_ms(5000),
            )
            .await?;
        assert_eq!(
            response.responses[0].error_code, 0,
            "DeleteTopics v{version}"
        );
        answered += 1;
    }

    println!("answered {answered} (api, version) pairs");
    broker.stop().await;
    Ok(())
}

/// Joins `group` alone at JoinGroup `version` (v4+ first gets MEMBER_ID_REQUIRED with its id, as
/// KIP-394 says); returns the member id and generation.
async fn join_alone(
    client: &mut Connection,
    group: &str,
    version: i16,
) -> anyhow::Result<(StrBytes, i32)> {
    let mut request = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_session_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(b"subscription")),
        ]);
    if version >= 1 {
        request = request.with_rebalance_timeout_ms(10_000);
    }
    let mut response: JoinGroupResponse =
        client.request(ApiKey::JoinGroup, version, &request).await?;
    if version >= 4 {
        assert_eq!(
            response.error_code, 79,
            "JoinGroup v{version}: MEMBER_ID_REQUIRED"
        );
        request = request.with_member_id(response.member_id.clone());
        response = client.request(ApiKey::JoinGroup, version, &request).await?;
    }
    assert_eq!(response.error_code, 0, "JoinGroup v{version}");
    assert_eq!(response.leader, response.member_id, "JoinGroup v{version}");
    Ok((response.member_id, response.generation_id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_group_api_version_answers() -> anyhow::Result<()> {
    let (broker, mut client, versions) = start_and_ask_versions().await?;
    create_topic(&mut client, "grouped", &[]).await?;
    let group_id = |text: &str| GroupId(StrBytes::from_string(text.to_owned()));
    let mut answered = 0usize;

    for version in advertised(&versions, ApiKey::FindCoordinator) {
        let request = if version >= 4 {
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")])
        } else {
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"))
        };
        let response: FindCoordinatorResponse = client
            .request(ApiKey::FindCoordinator, version, &request)
            .await?;
        if version >= 4 {
            assert_eq!(response.coordinators[0].error_code, 0);
            assert_eq!(response.coordinators[0].node_id.0, 1);
        } else {
            assert_eq!(response.error_code, 0, "FindCoordinator v{version}");
            assert_eq!(response.node_id.0, 1);
        }
        answered += 1;
    }

    let join_versions = advertised(&versions, ApiKey::JoinGroup);
    let group_versions_max = *join_versions.end();
    for version in join_versions {
        let group = format!("g-join-v{version}");
        join_alone(&mut client, &group, version).await?;
        answered += 1;
    }

    // Every SyncGroup, Heartbeat, OffsetCommit, OffsetFetch and LeaveGroup version, each on a
    // group of its own joined at the highest JoinGroup version.
    for version in advertised(&versions, ApiKey::SyncGroup) {
        let group = format!("g-sync-v{version}");
        let (member_id, generation_id) =
            join_alone(&mut client, &group, group_versions_max).await?;
        let mut request = SyncGroupRequest::default()
            .with_group_id(group_id(&group))
            .with_generation_id(generation_id)
            .with_member_id(member_id.clone())
            .with_assignments(vec![
                kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(member_id.clone())
                    .with_assignment(Bytes::from_static(b"assignment")),
            ]);
        if version >= 5 {
            request = request
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(StrBytes::from_static_str("range")));
        }
        let response: SyncGroupResponse =
            client.request(ApiKey::SyncGroup, version, &request).await?;
        assert_eq!(response.error_code, 0, "SyncGroup v{version}");
        assert_eq!(&response.assignment[..], b"assignment");
        answered += 1;
    }

    let group = "g-steady";
    let (member_id, generation_id) = join_alone(&mut client, group, group_versions_max).await?;
    let sync = SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(generation_id)
        .with_member_id(member_id.clone());
    let synced: SyncGroupResponse = client.request(ApiKey::SyncGroup, 0, &sync).await?;
    assert_eq!(synced.error_code, 0);
    for version in advertised(&versions, ApiKey::Heartbeat) {
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation_id)
            .with_member_id(member_id.clone());
        let response: HeartbeatResponse =
            client.request(ApiKey::Heartbeat, version, &request).await?;
        assert_eq!(response.error_code, 0, "Heartbeat v{version}");
        answered += 1;
    }
    for version in advertised(&versions, ApiKey::OffsetCommit) {
        let committed = 100 + i64::from(version);
        // v0 carries no member: Kafka accepts it only for a group without members (a "simple"
        // consumer); for a group with members it is UNKNOWN_MEMBER_ID.
        let target = if version == 0 { "g-simple" } else { group };
        let mut request = OffsetCommitRequest::default()
            .with_group_id(group_id(target))
            .with_topics(vec![
                kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(name("grouped"))
                    .with_partitions(vec![
                        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_committed_offset(committed),
                    ]),
            ]);
        if version >= 1 {
            request = request
                .with_generation_id_or_member_epoch(generation_id)
                .with_member_id(member_id.clone());
        }
        let response: OffsetCommitResponse = client
            .request(ApiKey::OffsetCommit, version, &request)
            .await?;
        assert_eq!(
            response.topics[0].partitions[0].error_code, 0,
            "OffsetCommit v{version}"
        );
        answered += 1;
    }
    let last_committed = 100 + i64::from(*advertised(&versions, ApiKey::OffsetCommit).end());
    for version in advertised(&versions, ApiKey::OffsetFetch) {
        let committed = if version >= 8 {
            let request = OffsetFetchRequest::default().with_groups(vec![
                kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group_id(group))
                    .with_topics(Some(vec![
                        kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(name("grouped"))
                            .with_partition_indexes(vec![0]),
                    ])),
            ]);
            let response: OffsetFetchResponse = client
                .request(ApiKey::OffsetFetch, version, &request)
                .await?;
            response.groups[0].topics[0].partitions[0].committed_offset
        } else {
            let request = OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(Some(vec![
                    kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name("grouped"))
                        .with_partition_indexes(vec![0]),
                ]));
            let response: OffsetFetchResponse = client
                .request(ApiKey::OffsetFetch, version, &request)
                .await?;
            response.topics[0].partitions[0].committed_offset
        };
        assert_eq!(committed, last_committed, "OffsetFetch v{version}");
        answered += 1;
    }
    for version in advertised(&versions, ApiKey::DescribeGroups) {
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
        let response: DescribeGroupsResponse = client
            .request(ApiKey::DescribeGroups, version, &request)
            .await?;
        assert_eq!(
            response.groups[0].error_code, 0,
            "DescribeGroups v{version}"
        );
        assert_eq!(response.groups[0].group_state.as_str(), "Stable");
        answered += 1;
    }
    for version in advertised(&versions, ApiKey::ListGroups) {
        let response: ListGroupsResponse = client
            .request(ApiKey::ListGroups, version, &ListGroupsRequest::default())
            .await?;
        assert_eq!(response.error_code, 0, "ListGroups v{version}");
        assert!(response
            .groups
            .iter()
            .any(|listed| listed.group_id.0.as_str() == group));
        answered += 1;
    }
    for version in advertised(&versions, ApiKey::LeaveGroup) {
        let group = format!("g-leave-v{version}");
        let (member_id, _) = join_alone(&mut client, &group, group_versions_max).await?;
        let request = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group_id(&group))
                .with_members(vec![
                    kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                        .with_member_id(member_id),
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group_id(&group))
                .with_member_id(member_id)
        };
        let response: LeaveGroupResponse = client
            .request(ApiKey::LeaveGroup, version, &request)
            .await?;
        assert_eq!(response.error_code, 0, "LeaveGroup v{version}");
        answered += 1;
    }
    let mut producer_ids = Vec::new();
    for version in advertised(&versions, ApiKey::InitProducerId) {
        let request = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
        let response: InitProducerIdResponse = client
            .request(ApiKey::InitProducerId, version, &request)
            .await?;
        assert_eq!(response.error_code, 0, "InitProducerId v{version}");
        producer_ids.push(response.producer_id.0);
        answered += 1;
    }
    let distinct: std::collections::BTreeSet<i64> = producer_ids.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        producer_ids.len(),
        "producer ids are never reused"
    );

    println!("answered {answered} group (api, version) pairs");
    broker.stop().await;
    Ok(())
}

/// The APIs the two tests above exercise at every advertised version, the SASL ones, which
/// `tests/security.rs` exercises at every version (they need a SASL listener), the admin ones
/// `tests/every_admin_version.rs` exercises, the transactional ones of `tests/txn_offsets.rs`, and
/// the consumer group ones of `tests/consumer_groups.rs`.
const EXERCISED_APIS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::Metadata,
    ApiKey::Produce,
    ApiKey::ListOffsets,
    ApiKey::Fetch,
    ApiKey::DescribeConfigs,
    ApiKey::DeleteTopics,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::LeaveGroup,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    // Config and partition admin APIs.
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DeleteRecords,
    ApiKey::DescribeLogDirs,
    ApiKey::DeleteGroups,
    ApiKey::ListPartitionReassignments,
    ApiKey::OffsetDelete,
    // Cluster admin APIs (tests/every_admin_version.rs).
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    // Client quota admin APIs (tests/client_quotas.rs).
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    // Security admin APIs (tests/acl_api.rs, every advertised version).
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeCluster,
    // The transaction coordinator's APIs (tests/transactions.rs, every advertised version).
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    // Transactions: TxnOffsetCommit at every advertised version (tests/txn_offsets.rs), and
    // WriteTxnMarkers v1, its only version (tests/transactions_partition.rs, tests/txn_offsets.rs).
    ApiKey::TxnOffsetCommit,
    ApiKey::WriteTxnMarkers,
    // DescribeProducers at every advertised version (tests/transactions_partition.rs).
    ApiKey::DescribeProducers,
    // KIP-848 consumer groups at every advertised version (tests/consumer_groups.rs).
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

/// What ApiVersions advertises decides what must be exercised: an API advertised without a case
/// in the tests above fails here until it gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_api_is_exercised() -> anyhow::Result<()> {
    let (_broker, _client, versions) = start_and_ask_versions().await?;
    let mut advertised: Vec<i16> = versions
        .api_keys
        .iter()
        .map(|entry| entry.api_key)
        .collect();
    let mut exercised: Vec<i16> = EXERCISED_APIS.iter().map(|key| *key as i16).collect();
    advertised.sort_unstable();
    exercised.sort_unstable();
    assert_eq!(advertised, exercised, "advertised vs exercised api keys");
    Ok(())
}
