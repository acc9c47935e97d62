//! The single-node topic registry of earlier releases (`skiff-topics.json` version 1) is migrated
//! into the metadata store at the first start: every topic keeps its id, overrides, partitions and
//! data; a name the store already has under another id refuses the start and changes nothing.

use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::Compression;
use skiff_storage::{LogConfig, LogDir};
use skiff_tests::{batch, create_topic, fetch, TestBroker};

const TOPIC_ID: &str = "00112233445566778899aabbccddeeff";

/// A data directory as a single-node release left it: logs `legacy-0` and `legacy-1` with one
/// batch of 3 records each, and the version 1 registry naming them.
fn single_node_directory(dir: &std::path::Path) {
    let logs = LogDir::open(dir, LogConfig::default()).expect("log dir");
    for partition in 0..2 {
        let log = logs.create("legacy", partition, None).expect("log");
        let mut records = batch(0, 3, 10, Compression::None);
        log.append(&mut records, 1_700_000_000_000).expect("append");
    }
    logs.close().expect("close");
    let registry = format!(
        r#"{{"version":1,"topics":[{{"name":"legacy","topic_id":"{TOPIC_ID}","replicas":[[1],[1]],"configs":{{"retention.ms":"123456789"}}}}]}}"#
    );
    std::fs::write(dir.join("skiff-topics.json"), registry).expect("registry");
}

async fn records_in(client: &mut Connection, partition: i32) -> anyhow::Result<usize> {
    let response = fetch(
        client,
        4,
        &fetch_request("legacy", partition, 0, 1 << 20, 1 << 20, 0),
    )
    .await?;
    let partition = &response.responses[0].partitions[0];
    anyhow::ensure!(partition.error_code == 0, "fetch: {partition:?}");
    let bytes = partition.records.clone().unwrap_or_default();
    Ok(skiff_protocol::records::v2::batch_positions(&bytes)
        .flatten()
        .map(|(_, header)| header.records_count as usize)
        .sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_registry_migrates_with_ids_configs_and_data() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    single_node_directory(dir.path());
    for start in 0..2 {
        let broker = TestBroker::start_in(dir.path(), &[]).await?;
        let mut client = Connection::connect(&broker.bootstrap()).await?;
        let metadata = client.metadata(&["legacy"]).await?;
        let topic = &metadata.topics[0];
        assert_eq!(topic.error_code, 0, "start {start}");
        assert_eq!(topic.partitions.len(), 2);
        for partition in 0..2 {
            assert_eq!(
                records_in(&mut client, partition).await?,
                3,
                "start {start}"
            );
        }
        let described: DescribeConfigsResponse = client
            .request(
                ApiKey::DescribeConfigs,
                1,
                &DescribeConfigsRequest::default().with_resources(vec![
                    kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(kafka_protocol::protocol::StrBytes::from_static_str("legacy"))
                        .with_configuration_keys(Some(vec![kafka_protocol::protocol::StrBytes::from_static_str("retention.ms")])),
                ]),
            )
            .await?;
        let value = described.results[0].configs[0]
            .value
            .as_ref()
            .map(|v| v.to_string());
        assert_eq!(value.as_deref(), Some("123456789"));
        broker.stop().await;
        let file = std::fs::read_to_string(dir.path().join("skiff-topics.json"))?;
        assert!(
            file.contains("\"version\": 2"),
            "rewritten as the materialized set: {file}"
        );
        assert!(
            file.contains(TOPIC_ID),
            "the id came back from the store: {file}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_store_has_under_another_id_refuses_the_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = TestBroker::start_in(dir.path(), &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "legacy", &[]).await?;
    drop(client);
    broker.stop().await;
    // An old registry naming another topic "legacy" lands in the directory.
    let registry = format!(
        r#"{{"version":1,"topics":[{{"name":"legacy","topic_id":"{TOPIC_ID}","replicas":[[1]],"configs":{{}}}}]}}"#
    );
    std::fs::write(dir.path().join("skiff-topics.json"), registry)?;
    let error = TestBroker::start_in(dir.path(), &[])
        .await
        .err()
        .expect("the start is refused");
    let message = format!("{error:#}");
    assert!(message.contains("cannot migrate topic legacy"), "{message}");
    assert!(dir.path().join("legacy-0").exists(), "nothing was deleted");
    Ok(())
}

/// Groups, each with its committed offset of `legacy` partition 0, in a single-node offsets log.
const GROUPS: usize = 24;

fn group_name(index: usize) -> String {
    format!("legacy-group-{index}")
}

/// A single-node offsets log (`__consumer_offsets-0`, every group's commits): group `i` committed
/// offset `i`, then `100 + i`; group 0's offset was then deleted (a tombstone).
fn single_node_offsets_log(dir: &std::path::Path) {
    use skiff_broker::group::{offsets_log, OffsetKey, OffsetLogEntry, OffsetValue};
    let key = |index: usize| OffsetKey {
        group: group_name(index),
        topic: "legacy".into(),
        partition: 0,
    };
    let commit = |index: usize, offset: i64| {
        OffsetLogEntry::Commit(
            key(index),
            OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: format!("m{offset}"),
                commit_timestamp_ms: 1_700_000_000_000,
            },
        )
    };
    let mut entries: Vec<OffsetLogEntry> = (0..GROUPS).map(|i| commit(i, i as i64)).collect();
    entries.extend((0..GROUPS).map(|i| commit(i, 100 + i as i64)));
    entries.push(OffsetLogEntry::Delete(key(0)));
    let logs = LogDir::open(dir, LogConfig::default()).expect("log dir");
    let log = logs
        .create("__consumer_offsets", 0, None)
        .expect("offsets log");
    for mut batch in offsets_log::encode_batches(&entries, 1_700_000_000_000).expect("encode") {
        log.append(&mut batch, 1_700_000_000_000).expect("append");
    }
    logs.close().expect("close");
}

/// The committed offset of `legacy` partition 0 for `group` (OffsetFetch v1), retried while the
/// coordinator loads.
async fn committed(client: &mut Connection, group: &str) -> anyhow::Result<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(kafka_protocol::protocol::StrBytes::from_string(
            group.to_owned(),
        )))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(skiff_tests::topic_name("legacy"))
            .with_partition_indexes(vec![0])]));
    for _ in 0..100 {
        let response: OffsetFetchResponse =
            client.request(ApiKey::OffsetFetch, 1, &request).await?;
        let partition = &response.topics[0].partitions[0];
        // COORDINATOR_LOAD_IN_PROGRESS (14): the partition is still being loaded.
        if partition.error_code == 14 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        anyhow::ensure!(partition.error_code == 0, "{group}: {partition:?}");
        return Ok(partition.committed_offset);
    }
    anyhow::bail!("{group}: still loading after 5 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_offsets_log_migrates_into_the_groups_partitions() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    single_node_directory(dir.path());
    single_node_offsets_log(dir.path());
    for start in 0..2 {
        let broker = TestBroker::start_in(dir.path(), &[]).await?;
        let mut client = Connection::connect(&broker.bootstrap()).await?;
        for index in 0..GROUPS {
            let expected = if index == 0 { -1 } else { 100 + index as i64 };
            assert_eq!(
                committed(&mut client, &group_name(index)).await?,
                expected,
                "start {start}, group {index}"
            );
        }
        broker.stop().await;
        assert!(dir.path().join("offsets-partitioned").exists());
        // Each group's offsets are in its own partition's log now.
        let with_data = (0..50)
            .filter(|partition| {
                std::fs::read_dir(dir.path().join(format!("__consumer_offsets-{partition}")))
                    .map(|files| {
                        files.flatten().any(|file| {
                            file.path().extension().is_some_and(|ext| ext == "log")
                                && file.metadata().is_ok_and(|meta| meta.len() > 0)
                        })
                    })
                    .unwrap_or(false)
            })
            .count();
        assert!(
            with_data > 10,
            "{GROUPS} groups spread over many partitions, found data in {with_data}"
        );
    }
    Ok(())
}
