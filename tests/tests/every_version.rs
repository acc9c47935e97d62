//! Every API the broker advertises answers at every advertised version with a response that a
//! client decodes: a field that a version lacks must never be set (kafka-protocol refuses to encode
//! it, and the broker would have to close the connection).

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::legacy::LegacySetBuilder;
use skiff_protocol::records::{Compression, Magic};
use skiff_tests::{batch, TestBroker};

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

fn advertised(response: &ApiVersionsResponse, api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let entry = response
        .api_keys
        .iter()
        .find(|entry| entry.api_key == api_key as i16)
        .unwrap_or_else(|| panic!("{api_key:?} is not advertised"));
    entry.min_version..=entry.max_version
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
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
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
