//! A data directory written by an earlier release opens unchanged: `tests/fixtures/
//! data-dir-7bc86d5.tar.gz` was written by the release at commit 7bc86d5 (by
//! `tests/fixtures/make-data-dir.py`, which says what it holds) and shut down cleanly. Every
//! record, topic config, committed offset and time-index entry reads back as that release wrote
//! it, and the directory keeps working: a record appended after the upgrade survives a restart.

use std::path::Path;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeConfigsRequest, DescribeConfigsResponse, GroupId, ListOffsetsRequest,
    ListOffsetsResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::record::batch_records;
use skiff_protocol::records::{v2, Compression};
use skiff_tests::{batch, fetch, topic_name, TestBroker};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/data-dir-7bc86d5.tar.gz"
);
/// Decompressed bytes one gzip batch of the fixture may take (its batches are a few KiB).
const DECOMPRESSED_BYTES_MAX: usize = 1 << 20;

/// One record as read back: its offset, timestamp, key, value and header count.
type ReadRecord = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

fn unpack_fixture(into: &Path) -> anyhow::Result<()> {
    let status = std::process::Command::new("tar")
        .args(["-xzf", FIXTURE, "-C"])
        .arg(into)
        .status()?;
    anyhow::ensure!(status.success(), "tar -xzf {FIXTURE}: {status}");
    Ok(())
}

async fn read_all(
    client: &mut Connection,
    topic: &str,
    partition: i32,
) -> anyhow::Result<Vec<ReadRecord>> {
    let mut records = Vec::new();
    let mut next = 0;
    loop {
        let request = fetch_request(topic, partition, next, 1 << 20, 1 << 20, 0);
        let response = fetch(client, 4, &request).await?;
        let answer = &response.responses[0].partitions[0];
        anyhow::ensure!(
            answer.error_code == 0,
            "fetch {topic}-{partition}: {answer:?}"
        );
        let bytes = answer.records.clone().unwrap_or_default();
        let before = records.len();
        for position in v2::batch_positions(&bytes) {
            let (start, header) = position?;
            let mut scratch = Vec::new();
            let batch = &bytes[start..start + header.total_bytes()];
            for record in batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)? {
                let record = record?;
                records.push((
                    record.offset,
                    record.timestamp,
                    record.key.map(<[u8]>::to_vec),
                    record.value.map(<[u8]>::to_vec),
                    record.headers.len(),
                ));
            }
            next = header.next_offset();
        }
        if records.len() == before {
            return Ok(records);
        }
    }
}

/// Checks every record of the fixture; `appended` records follow the release's 200 in
/// `release-segments`.
async fn check_records(client: &mut Connection, appended: usize) -> anyhow::Result<()> {
    for partition in 0..3 {
        let records = read_all(client, "release-plain", partition).await?;
        let expected: Vec<usize> = (0..300).filter(|i| i % 3 == partition as usize).collect();
        assert_eq!(records.len(), expected.len(), "release-plain-{partition}");
        for (offset, (record, i)) in records.iter().zip(expected).enumerate() {
            assert_eq!(record.0, offset as i64);
            assert_eq!(record.1, 1_700_000_000_000 + i as i64);
            assert_eq!(
                record.2.as_deref(),
                Some(format!("key-{}", i % 7).as_bytes())
            );
            assert_eq!(record.3.as_deref(), Some(format!("value-{i}").as_bytes()));
            assert_eq!(record.4, 1, "one header");
        }
    }
    let gzip = read_all(client, "release-gzip", 0).await?;
    assert_eq!(gzip.len(), 100);
    for (i, record) in gzip.iter().enumerate() {
        assert_eq!(record.0, i as i64);
        assert!(record.2.is_none(), "no key");
        let value = format!("gz-{i}-{}", "x".repeat(50));
        assert_eq!(record.3.as_deref(), Some(value.as_bytes()));
    }
    let segments = read_all(client, "release-segments", 0).await?;
    assert_eq!(segments.len(), 200 + appended);
    for (i, record) in segments.iter().take(200).enumerate() {
        assert_eq!(record.0, i as i64);
        let value = format!("segment-value-{i}");
        assert_eq!(record.3.as_deref(), Some(value.as_bytes()));
    }
    Ok(())
}

async fn described(client: &mut Connection, topic: &str, key: &str) -> anyhow::Result<String> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.into())]))]);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, 1, &request).await?;
    let value = response.results[0].configs[0].value.as_ref();
    Ok(value.map(|v| v.to_string()).unwrap_or_default())
}

async fn committed(client: &mut Connection) -> anyhow::Result<Vec<(String, i32, i64)>> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("release-group")))
        .with_topics(Some(
            ["release-plain", "release-gzip"]
                .iter()
                .map(|topic| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(vec![0, 1, 2])
                })
                .collect(),
        ));
    let response: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 5, &request).await?;
    let mut offsets = Vec::new();
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.committed_offset >= 0 {
                offsets.push((
                    topic.name.to_string(),
                    partition.partition_index,
                    partition.committed_offset,
                ));
            }
        }
    }
    offsets.sort();
    Ok(offsets)
}

/// ListOffsets by timestamp on the topic of 1 KiB segments: answered from the time indexes.
async fn offset_for_time(client: &mut Connection, timestamp: i64) -> anyhow::Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name("release-segments"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 1, &request).await?;
    let partition = &response.topics[0].partitions[0];
    anyhow::ensure!(partition.error_code == 0, "list offsets: {partition:?}");
    Ok(partition.offset)
}

async fn check_everything(client: &mut Connection, appended: usize) -> anyhow::Result<()> {
    check_records(client, appended).await?;
    assert_eq!(
        described(client, "release-gzip", "retention.ms").await?,
        "987654321"
    );
    assert_eq!(
        described(client, "release-gzip", "compression.type").await?,
        "gzip"
    );
    assert_eq!(
        described(client, "release-segments", "segment.bytes").await?,
        "1024"
    );
    let expected = vec![
        ("release-gzip".to_string(), 0, 100),
        ("release-plain".to_string(), 0, 42),
        ("release-plain".to_string(), 2, 77),
    ];
    assert_eq!(committed(client).await?, expected);
    for (timestamp, offset) in [(1_700_000_200_000, 0), (1_700_000_200_150, 150)] {
        assert_eq!(offset_for_time(client, timestamp).await?, offset);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_release_7bc86d5_opens_unchanged() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    unpack_fixture(dir.path())?;
    let broker = TestBroker::start_in(dir.path(), &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    check_everything(&mut client, 0).await?;
    let appended = batch(0, 5, 10, Compression::None);
    let base = client
        .produce("release-segments", 0, bytes::Bytes::from(appended))
        .await?;
    assert_eq!(
        base, 200,
        "appends continue after the release's last offset"
    );
    broker.stop().await;

    let broker = TestBroker::start_in(dir.path(), &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    check_everything(&mut client, 5).await
}

/// Sets topic configs with IncrementalAlterConfigs, as `kafka-configs.sh --alter` does.
async fn alter_topic(
    client: &mut Connection,
    topic: &str,
    configs: &[(&str, &str)],
) -> anyhow::Result<()> {
    use kafka_protocol::messages::incremental_alter_configs_request as incremental;
    let request = incremental::IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(
                configs
                    .iter()
                    .map(|(key, value)| {
                        incremental::AlterableConfig::default()
                            .with_name(StrBytes::from_string((*key).into()))
                            .with_value(Some(StrBytes::from_string((*value).into())))
                    })
                    .collect(),
            ),
    ]);
    let response: kafka_protocol::messages::IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await?;
    let result = &response.responses[0];
    anyhow::ensure!(result.error_code == 0, "alter {topic}: {result:?}");
    Ok(())
}

/// Commits `offsets` for the release's group (as a consumer outside a generation does).
async fn commit(client: &mut Connection, offsets: &[(&str, i32, i64)]) -> anyhow::Result<()> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("release-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            offsets
                .iter()
                .map(|(topic, partition, offset)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(vec![OffsetCommitRequestPartition::default()
                            .with_partition_index(*partition)
                            .with_committed_offset(*offset)])
                })
                .collect(),
        );
    let response: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 2, &request).await?;
    for topic in &response.topics {
        for partition in &topic.partitions {
            anyhow::ensure!(partition.error_code == 0, "commit: {partition:?}");
        }
    }
    Ok(())
}

/// Records in every partition of `__consumer_offsets`.
async fn offsets_log_records(client: &mut Connection) -> anyhow::Result<usize> {
    let mut total = 0;
    for partition in 0..50 {
        total += read_all(client, "__consumer_offsets", partition)
            .await?
            .len();
    }
    Ok(total)
}

/// The release kept its offsets logs short by appending snapshots; from the upgrade on they are
/// compacted by key by the log cleaner, like any `cleanup.policy=compact` topic, and what a
/// replay of the compacted logs rebuilds is every group's latest commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_offsets_logs_are_compacted_by_key_after_the_upgrade() -> anyhow::Result<()> {
    const COMMITS: i64 = 300;
    let dir = tempfile::tempdir()?;
    unpack_fixture(dir.path())?;
    // Not a short retention check: retention would delete the fixture's 2023 records.
    let overrides = ["log.cleaner.backoff.ms=50"];
    let broker = TestBroker::start_in(dir.path(), &overrides).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    assert_eq!(
        described(&mut client, "__consumer_offsets", "cleanup.policy").await?,
        "compact",
        "the release's offsets topic has no cleanup.policy of its own"
    );
    // Small segments and an eager cleaner, so a few hundred commits make sealed dirty segments.
    let eager = [
        ("segment.bytes", "1024"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    alter_topic(&mut client, "__consumer_offsets", &eager).await?;
    for round in 0..COMMITS {
        let offsets = [
            ("release-plain", 0, 1_000 + round),
            ("release-plain", 2, 2_000 + round),
            ("release-gzip", 0, 3_000 + round),
        ];
        commit(&mut client, &offsets).await?;
    }
    let expected = vec![
        ("release-gzip".to_string(), 0, 3_000 + COMMITS - 1),
        ("release-plain".to_string(), 0, 1_000 + COMMITS - 1),
        ("release-plain".to_string(), 2, 2_000 + COMMITS - 1),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut records = offsets_log_records(&mut client).await?;
    while records > 60 {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the offsets logs still hold {records} records 30 s after {} commits",
            3 * COMMITS
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        records = offsets_log_records(&mut client).await?;
    }
    assert_eq!(committed(&mut client).await?, expected);
    broker.stop().await;

    // A replay of the compacted logs rebuilds the same offsets.
    let broker = TestBroker::start_in(dir.path(), &overrides).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        // COORDINATOR_LOAD_IN_PROGRESS answers no offsets while the partition loads.
        let offsets = committed(&mut client).await?;
        if offsets == expected {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "after a restart: {offsets:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    check_records(&mut client, 0).await
}

/// A transactional batch: one record of producer `producer_id`, epoch 0, sequence 0.
fn transactional_batch(producer_id: i64) -> Vec<u8> {
    let mut builder = skiff_protocol::records::record::BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = 0;
    builder.transactional = true;
    builder
        .push(&skiff_protocol::records::record::NewRecord {
            offset_delta: 0,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(b"in a transaction"),
            headers: &[],
        })
        .expect("record fits");
    builder.build().expect("batch builds")
}

/// The `version` field of the directory's `skiff-topics.json` (written pretty, one field a line).
fn topics_file_version(dir: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(dir.join("skiff-topics.json"))?;
    let line = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("\"version\": "))
        .ok_or_else(|| anyhow::anyhow!("no version in skiff-topics.json"))?;
    Ok(line.trim_end_matches(',').parse()?)
}

/// Issue 38 part 6: the previous release (0a41850) reads `skiff-topics.json` versions 1 and 2
/// only and refuses to start on any other ("has unknown version"). A directory of that release
/// stays at version 2 after the upgrade; the first transactional batch written moves it to
/// version 3 before the batch is on disk, so the previous release refuses it instead of serving
/// aborted records as committed; this release opens it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_transactional_batch_marks_the_directory_against_a_downgrade(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    unpack_fixture(dir.path())?;
    let broker = TestBroker::start_in(dir.path(), &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    skiff_tests::create_topic(&mut client, "txn-guard", &[]).await?;
    client.await_partitions_ready("txn-guard", 1).await?;
    let plain = batch(0, 2, 10, Compression::None);
    client
        .produce("txn-guard", 0, bytes::Bytes::from(plain))
        .await?;
    assert_eq!(topics_file_version(dir.path())?, 2, "no transaction yet");
    let transactional = bytes::Bytes::from(transactional_batch(4_000));
    client.produce("txn-guard", 0, transactional).await?;
    assert_eq!(topics_file_version(dir.path())?, 3);
    broker.stop().await;
    assert_eq!(topics_file_version(dir.path())?, 3, "later saves keep it");

    let broker = TestBroker::start_in(dir.path(), &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    client.await_partitions_ready("release-plain", 3).await?;
    check_everything(&mut client, 0).await?;
    broker.stop().await;
    Ok(())
}
