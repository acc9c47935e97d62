//! The config and partition admin APIs end to end: CreatePartitions grows a topic whose new
//! partitions take records and survive a restart; IncrementalAlterConfigs and AlterConfigs change
//! a topic's behaviour at once (produce's size limit, retention in the background) and durably;
//! DescribeConfigs reports sources and synonyms as Kafka does, and describes the broker.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::Compression;
use skiff_tests::{batch, create_topic, fetch, produce_records, topic_name, TestBroker};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// A result's error code and message, as the assertions compare them.
fn outcome(code: i16, message: &Option<StrBytes>) -> (i16, Option<String>) {
    (code, message.as_ref().map(|message| message.to_string()))
}

async fn create_partitions(
    client: &mut Connection,
    topic: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> anyhow::Result<(i16, Option<String>)> {
    let assignments = assignments.map(|lists| {
        lists
            .into_iter()
            .map(|brokers| {
                CreatePartitionsAssignment::default()
                    .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
            })
            .collect()
    });
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_validate_only(validate_only)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(topic))
            .with_count(count)
            .with_assignments(assignments)]);
    let response: CreatePartitionsResponse = client
        .request(ApiKey::CreatePartitions, 3, &request)
        .await?;
    let result = &response.results[0];
    Ok(outcome(result.error_code, &result.error_message))
}

async fn alter(
    client: &mut Connection,
    resource_type: i8,
    name: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> anyhow::Result<(i16, Option<String>)> {
    let configs = changes
        .iter()
        .map(|(key, op, value)| {
            AlterableConfig::default()
                .with_name(text(key))
                .with_config_operation(*op)
                .with_value(value.map(text))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configs(configs)]);
    let response: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await?;
    let result = &response.responses[0];
    Ok(outcome(result.error_code, &result.error_message))
}

async fn describe(
    client: &mut Connection,
    resource_type: i8,
    name: &str,
) -> anyhow::Result<(i16, BTreeMap<String, DescribeConfigsResourceResult>)> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, 4, &request).await?;
    let result = &response.results[0];
    Ok((
        result.error_code,
        result
            .configs
            .iter()
            .map(|config| (config.name.to_string(), config.clone()))
            .collect(),
    ))
}

async fn partition_count(client: &mut Connection, topic: &str) -> anyhow::Result<usize> {
    let metadata = client.metadata(&[topic]).await?;
    Ok(metadata.topics[0].partitions.len())
}

async fn log_start(client: &mut Connection, topic: &str) -> anyhow::Result<i64> {
    let earliest = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-2)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 1, &earliest).await?;
    Ok(response.topics[0].partitions[0].offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_grow_take_records_and_survive_a_restart() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let dir = format!("log.dirs={}", data.path().display());
    let broker = TestBroker::start(&[&dir]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "grows", &[]).await?;

    // validate_only changes nothing.
    assert_eq!(
        create_partitions(&mut client, "grows", 3, None, true)
            .await?
            .0,
        0
    );
    assert_eq!(partition_count(&mut client, "grows").await?, 1);

    assert_eq!(
        create_partitions(&mut client, "grows", 3, None, false).await?,
        (0, None)
    );
    assert_eq!(partition_count(&mut client, "grows").await?, 3);

    // Kafka's refusals, with a message each.
    for (count, assignments, code) in [
        (2, None, 37),                   // decrease: INVALID_PARTITIONS
        (3, None, 37),                   // the same count
        (20_000, None, 37),              // above the bound
        (4, Some(vec![vec![7]]), 39), // a broker that is not this one: INVALID_REPLICA_ASSIGNMENT
        (5, Some(vec![vec![1]]), 39), // one assignment for two new partitions
        (4, Some(vec![vec![1, 1]]), 39), // this broker twice
    ] {
        let (got, message) =
            create_partitions(&mut client, "grows", count, assignments, false).await?;
        assert_eq!(got, code, "count {count}: {message:?}");
        assert!(message.is_some_and(|message| !message.is_empty()));
    }
    let (code, _) = create_partitions(&mut client, "missing", 2, None, false).await?;
    assert_eq!(code, 3);
    // An assignment naming this broker is honoured.
    assert_eq!(
        create_partitions(&mut client, "grows", 4, Some(vec![vec![1]]), false).await?,
        (0, None)
    );
    assert_eq!(partition_count(&mut client, "grows").await?, 4);

    let records = bytes::Bytes::from(batch(0, 3, 10, Compression::None));
    assert_eq!(client.produce("grows", 3, records).await?, 0);
    broker.stop().await;

    let broker = TestBroker::start(&[&dir]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    assert_eq!(partition_count(&mut client, "grows").await?, 4);
    let response = fetch(
        &mut client,
        4,
        &fetch_request("grows", 3, 0, 1 << 20, 1 << 20, 0),
    )
    .await?;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.high_watermark, 3);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_apply_at_once_and_survive_a_restart() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let dir = format!("log.dirs={}", data.path().display());
    // The test batches carry 2023 timestamps: only size-based retention may delete them.
    let overrides = [
        dir.as_str(),
        "log.retention.check.interval.ms=100",
        "log.retention.ms=-1",
    ];
    let broker = TestBroker::start(&overrides).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "tuned", &[("segment.bytes", "4096")]).await?;

    // Retention changed at runtime is what the background maintenance applies.
    produce_records(&mut client, "tuned", 200, 10, 100).await?;
    assert_eq!(log_start(&mut client, "tuned").await?, 0);
    assert_eq!(
        alter(
            &mut client,
            TOPIC,
            "tuned",
            &[("retention.bytes", SET, Some("4096"))],
            false
        )
        .await?,
        (0, None)
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while log_start(&mut client, "tuned").await? == 0 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the new retention never applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // max.message.bytes is what produce checks, from the next request on.
    let big = bytes::Bytes::from(batch(0, 1, 500, Compression::None));
    client.produce("tuned", 0, big.clone()).await?;
    let (code, _) = alter(
        &mut client,
        TOPIC,
        "tuned",
        &[("max.message.bytes", SET, Some("200"))],
        true,
    )
    .await?;
    assert_eq!(code, 0, "validate only");
    client.produce("tuned", 0, big.clone()).await?;
    assert_eq!(
        alter(
            &mut client,
            TOPIC,
            "tuned",
            &[("max.message.bytes", SET, Some("200"))],
            false
        )
        .await?,
        (0, None)
    );
    let refused = client.produce("tuned", 0, big.clone()).await;
    assert!(
        refused.is_err(),
        "a 500-byte batch above max.message.bytes=200 was accepted"
    );

    let (_, configs) = describe(&mut client, TOPIC, "tuned").await?;
    let entry = &configs["max.message.bytes"];
    assert_eq!(entry.value.as_deref(), Some("200"));
    assert_eq!(entry.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    let synonyms: Vec<(String, i8)> = entry
        .synonyms
        .iter()
        .map(|synonym| (synonym.name.to_string(), synonym.source))
        .collect();
    assert_eq!(
        synonyms,
        [
            ("max.message.bytes".to_owned(), 1),
            ("message.max.bytes".to_owned(), 5)
        ]
    );
    let retention = &configs["retention.ms"];
    assert_eq!(retention.config_source, 4, "STATIC_BROKER_CONFIG");
    assert_eq!(retention.synonyms[0].name.as_str(), "log.retention.ms");
    let roll = &configs["segment.ms"];
    assert_eq!(roll.config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(roll.synonyms[0].name.as_str(), "log.roll.ms");
    assert_eq!(roll.synonyms[0].value, roll.value);

    // Refusals, each with a message: an unsupported value, APPEND to a key that is not a list, an
    // unknown key, a null value (INVALID_REQUEST), an unknown topic.
    let refusals = [
        (
            "tuned",
            "cleanup.policy",
            SET,
            Some("shred"),
            40,
            "cleanup.policy",
        ),
        (
            "tuned",
            "cleanup.policy",
            APPEND,
            Some("shred"),
            40,
            "cleanup.policy",
        ),
        ("tuned", "retention.ms", APPEND, Some("1"), 40, "LIST"),
        ("tuned", "colour", SET, Some("blue"), 40, "colour"),
        ("tuned", "retention.ms", SET, None, 42, "Null value"),
        (
            "missing",
            "retention.ms",
            SET,
            Some("1"),
            3,
            "unknown topic",
        ),
    ];
    for (topic, key, op, value, expected, says) in refusals {
        let (code, message) = alter(&mut client, TOPIC, topic, &[(key, op, value)], false).await?;
        let message = message.unwrap_or_default();
        assert_eq!(code, expected, "{key} op {op}: {message}");
        assert!(message.contains(says), "{key} op {op}: {message}");
    }

    broker.stop().await;

    // After a restart the overrides are still in force, and DELETE falls back to the default.
    let broker = TestBroker::start(&overrides).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let (_, configs) = describe(&mut client, TOPIC, "tuned").await?;
    assert_eq!(configs["max.message.bytes"].value.as_deref(), Some("200"));
    assert_eq!(configs["max.message.bytes"].config_source, 1);
    assert!(client.produce("tuned", 0, big.clone()).await.is_err());
    assert_eq!(
        alter(
            &mut client,
            TOPIC,
            "tuned",
            &[("max.message.bytes", DELETE, None)],
            false
        )
        .await?,
        (0, None)
    );
    let (_, configs) = describe(&mut client, TOPIC, "tuned").await?;
    assert_eq!(configs["max.message.bytes"].config_source, 5);
    assert_eq!(
        configs["max.message.bytes"].value.as_deref(),
        Some("1048588")
    );
    client.produce("tuned", 0, big).await?;

    // The legacy AlterConfigs replaces the whole set: segment.bytes and retention.bytes go.
    use kafka_protocol::messages::alter_configs_request as legacy;
    let request =
        AlterConfigsRequest::default().with_resources(vec![legacy::AlterConfigsResource::default(
        )
        .with_resource_type(TOPIC)
        .with_resource_name(text("tuned"))
        .with_configs(vec![legacy::AlterableConfig::default()
            .with_name(text("retention.ms"))
            .with_value(Some(text("86400000")))])]);
    let response: AlterConfigsResponse = client.request(ApiKey::AlterConfigs, 1, &request).await?;
    assert_eq!(response.responses[0].error_code, 0);
    let (_, configs) = describe(&mut client, TOPIC, "tuned").await?;
    assert_eq!(configs["retention.ms"].config_source, 1);
    assert_eq!(configs["segment.bytes"].config_source, 5);
    assert_eq!(configs["retention.bytes"].config_source, 5);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_is_described_and_its_static_configs_are_not_changed_at_runtime(
) -> anyhow::Result<()> {
    let broker = TestBroker::start(&["log.retention.ms=3600000"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let (code, configs) = describe(&mut client, BROKER, "1").await?;
    assert_eq!(code, 0);
    let retention = &configs["log.retention.ms"];
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.config_source, 4, "STATIC_BROKER_CONFIG");
    // A topic default is a dynamic broker config (Kafka's DynamicLogConfig); log.dirs is not.
    assert!(!retention.read_only);
    assert!(configs["log.dirs"].read_only);
    assert_eq!(configs["num.partitions"].config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(configs["num.partitions"].value.as_deref(), Some("1"));
    // The empty name is the cluster's dynamic defaults: none. Another broker id is refused.
    let (code, configs) = describe(&mut client, BROKER, "").await?;
    assert_eq!((code, configs.len()), (0, 0));
    assert_eq!(describe(&mut client, BROKER, "7").await?.0, 42);

    // A topic's default now comes from the broker's static key.
    create_topic(&mut client, "inherits", &[]).await?;
    let (_, configs) = describe(&mut client, TOPIC, "inherits").await?;
    assert_eq!(configs["retention.ms"].value.as_deref(), Some("3600000"));
    assert_eq!(configs["retention.ms"].config_source, 4);

    let (code, message) = alter(
        &mut client,
        BROKER,
        "1",
        &[("log.dirs", SET, Some("/elsewhere"))],
        false,
    )
    .await?;
    assert_eq!(code, 42);
    assert!(message.unwrap_or_default().contains("log.dirs"));
    let (code, _) = alter(
        &mut client,
        BROKER,
        "",
        &[("no.such.key", SET, Some("1"))],
        false,
    )
    .await?;
    assert_eq!(code, 40);
    let (code, _) = alter(
        &mut client,
        BROKER,
        "7",
        &[("log.retention.ms", SET, Some("1"))],
        false,
    )
    .await?;
    assert_eq!(code, 42);
    broker.stop().await;
    Ok(())
}
