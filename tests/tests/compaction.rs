//! Compacted topics end to end over the wire: a keyless record is refused per record
//! (INVALID_RECORD with `record_errors` from Produce v8); DeleteRecords answers POLICY_VIOLATION on
//! a compact-only topic and works again after a live switch to `compact,delete`; DescribeConfigs
//! reports the cleaner's keys with their sources and synonyms; and the cleaner threads compact a
//! topic to its latest value per key, keeping every record at its offset, so that a fetch from
//! inside a gap and a ListOffsets by time answer with the next record.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::{v2, Compression};
use skiff_tests::{create_topic, fetch, topic_name, TestBroker};

const INVALID_RECORD: i16 = 87;
const POLICY_VIOLATION: i16 = 44;
const SOURCE_DYNAMIC_TOPIC_CONFIG: i8 = 1;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// One batch of `(key, value)` records, all at `timestamp_ms`.
fn keyed(records: &[(Option<String>, Option<String>)], timestamp_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    for (delta, (key, value)) in records.iter().enumerate() {
        builder
            .push(&NewRecord {
                offset_delta: i32::try_from(delta).unwrap(),
                timestamp: timestamp_ms,
                key: key.as_deref().map(str::as_bytes),
                value: value.as_deref().map(str::as_bytes),
                headers: &[],
            })
            .unwrap();
    }
    builder.build().unwrap()
}

async fn produce_v8(
    client: &mut Connection,
    topic: &str,
    batch: Vec<u8>,
) -> anyhow::Result<produce_response::PartitionProduceResponse> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(bytes::Bytes::from(batch)))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 8, &request).await?;
    Ok(response.responses[0].partition_responses[0].clone())
}

async fn alter(client: &mut Connection, topic: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text(topic))
            .with_configs(vec![AlterableConfig::default()
                .with_name(text(key))
                .with_value(Some(text(value)))]),
    ]);
    let response: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await?;
    anyhow::ensure!(response.responses[0].error_code == 0, "{response:?}");
    Ok(())
}

async fn delete_records(client: &mut Connection, topic: &str, before: i64) -> anyhow::Result<i16> {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(before)])]);
    let response: DeleteRecordsResponse =
        client.request(ApiKey::DeleteRecords, 1, &request).await?;
    Ok(response.topics[0].partitions[0].error_code)
}

/// Every record of partition 0 from `from`: (offset, timestamp, key, value).
async fn read_from(
    client: &mut Connection,
    topic: &str,
    from: i64,
) -> anyhow::Result<Vec<(i64, i64, Option<String>, Option<String>)>> {
    let (mut records, mut next) = (Vec::new(), from);
    loop {
        let request = fetch_request(topic, 0, next, 1 << 20, 1 << 20, 0);
        let response = fetch(client, 4, &request).await?;
        let bytes = response.responses[0].partitions[0]
            .records
            .clone()
            .unwrap_or_default();
        let before = records.len();
        for position in v2::batch_positions(&bytes) {
            let (start, header) = position?;
            let batch = &bytes[start..start + header.total_bytes()];
            let mut scratch = Vec::new();
            for record in batch_records(batch, &header, &mut scratch, 1 << 20)? {
                let record = record?;
                let as_text = |bytes: Option<&[u8]>| {
                    bytes.map(|bytes| String::from_utf8_lossy(bytes).into_owned())
                };
                if record.offset >= from {
                    records.push((
                        record.offset,
                        record.timestamp,
                        as_text(record.key),
                        as_text(record.value),
                    ));
                }
            }
            next = header.next_offset();
        }
        if records.len() == before {
            return Ok(records);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_and_delete_records_follow_the_policy() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "c", &[("cleanup.policy", "compact")]).await?;
    client.await_partitions_ready("c", 1).await?;
    let mixed = keyed(
        &[
            (Some("a".into()), Some("1".into())),
            (None, Some("no key".into())),
            (None, Some("no key either".into())),
        ],
        1_000,
    );
    let refused = produce_v8(&mut client, "c", mixed).await?;
    assert_eq!(refused.error_code, INVALID_RECORD);
    let indexes: Vec<i32> = refused
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indexes, [1, 2]);
    let why = refused.record_errors[0].batch_index_error_message.as_ref();
    assert!(why
        .unwrap()
        .contains("Compacted topic cannot accept message without key"));
    assert!(refused.error_message.is_some());
    let keyed_only = keyed(&[(Some("a".into()), Some("1".into()))], 1_000);
    assert_eq!(
        produce_v8(&mut client, "c", keyed_only).await?.error_code,
        0
    );

    assert_eq!(delete_records(&mut client, "c", 1).await?, POLICY_VIOLATION);
    alter(&mut client, "c", "cleanup.policy", "compact,delete").await?;
    assert_eq!(delete_records(&mut client, "c", 1).await?, 0);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_reports_the_cleaners_keys() -> anyhow::Result<()> {
    let broker = TestBroker::start(&["log.cleaner.delete.retention.ms=5000"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "c", &[("cleanup.policy", "compact")]).await?;
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("c"))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, 1, &request).await?;
    let configs: BTreeMap<String, _> = response.results[0]
        .configs
        .iter()
        .map(|config| (config.name.to_string(), config.clone()))
        .collect();
    let policy = &configs["cleanup.policy"];
    assert_eq!(
        policy.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("compact")
    );
    assert_eq!(policy.config_source, SOURCE_DYNAMIC_TOPIC_CONFIG);
    let ratio = &configs["min.cleanable.dirty.ratio"];
    assert_eq!(
        ratio.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("0.5")
    );
    assert_eq!(ratio.config_source, SOURCE_DEFAULT_CONFIG);
    assert_eq!(
        ratio.synonyms[0].name.as_str(),
        "log.cleaner.min.cleanable.ratio"
    );
    let retention = &configs["delete.retention.ms"];
    assert_eq!(
        retention.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("5000")
    );
    for key in [
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "segment.ms",
    ] {
        assert!(configs.contains_key(key), "{key}");
    }
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cleaner_keeps_the_latest_value_per_key_at_its_offset() -> anyhow::Result<()> {
    const KEYS: usize = 20;
    const VERSIONS: usize = 10;
    // The active segment is never cleaned: segment.ms and a short roll check seal it.
    let overrides = [
        "log.cleaner.backoff.ms=50",
        "log.retention.check.interval.ms=100",
    ];
    let broker = TestBroker::start(&overrides).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "2048"),
        ("segment.ms", "200"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    create_topic(&mut client, "c", &configs).await?;
    client.await_partitions_ready("c", 1).await?;
    for version in 0..VERSIONS {
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(5) {
            let records: Vec<_> = chunk
                .iter()
                .map(|key| (Some(format!("k{key}")), Some(format!("k{key}v{version}"))))
                .collect();
            let at = 1_000_000 + version as i64 * 1_000;
            client
                .produce("c", 0, bytes::Bytes::from(keyed(&records, at)))
                .await?;
        }
    }
    let before = read_from(&mut client, "c", 0).await?;
    assert_eq!(before.len(), KEYS * VERSIONS);
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let records = read_from(&mut client, "c", 0).await?;
        if records.len() == KEYS {
            break records;
        }
        assert!(Instant::now() < deadline, "{} records left", records.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Every record kept is the one written at its offset, and each key's latest is there.
    let written: BTreeMap<i64, _> = before.iter().map(|r| (r.0, r.clone())).collect();
    for record in &after {
        assert_eq!(&written[&record.0], record, "offset {}", record.0);
    }
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    for record in &after {
        latest.insert(record.2.clone().unwrap(), record.3.clone().unwrap());
    }
    assert_eq!(latest.len(), KEYS);
    for (key, value) in &latest {
        assert_eq!(value, &format!("{key}v{}", VERSIONS - 1));
    }
    // A fetch from inside a gap starts at the next record kept.
    let first_kept = after[0].0;
    assert!(first_kept > 0, "the oldest versions went");
    assert_eq!(
        read_from(&mut client, "c", 1).await?.first().map(|r| r.0),
        Some(first_kept)
    );
    // ListOffsets by time answers the first record at or after it that is still there.
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name("c"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(1_000_000)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 1, &request).await?;
    let answer = &response.topics[0].partitions[0];
    assert_eq!(answer.error_code, 0);
    assert!(
        answer.offset <= first_kept,
        "{} past the first kept record {first_kept}",
        answer.offset
    );
    broker.stop().await;
    Ok(())
}
