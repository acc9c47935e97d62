//! Issue 38 part 5 over the wire: a legacy consumer (Fetch v0–v3, no isolation level) of a topic
//! written by transactions (one aborted, one committed, one open) reads everything below the high
//! watermark with `skiff.legacy.isolation.level` at its default (`read_uncommitted`, Kafka's
//! behaviour), and only the committed records below the last stable offset with
//! `read_committed`; markers never. The key is described with its source and a bad value is
//! refused naming the key and the allowed values. No transaction coordinator takes part (the
//! markers are this test's), so KIP-890's verification is switched off.

use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_protocol::records::legacy::{deep_records, DeepOptions};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use skiff_tests::{create_topic, fetch, topic_name, TestBroker};

const KEY: &str = "skiff.legacy.isolation.level";
/// KIP-890's check off: no coordinator here to confirm the test's transactions (the markers are
/// this test's, as in `transactions_partition.rs`).
const NO_VERIFICATION: &str = "transaction.partition.verification.enable=false";

fn batch(producer_id: i64, epoch: i16, count: i32) -> Vec<u8> {
    batch_at(producer_id, epoch, count, 0)
}

/// [`batch`] from sequence `base_sequence` (the producer's next batch of the same epoch).
fn batch_at(producer_id: i64, epoch: i16, count: i32, base_sequence: i32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = epoch;
    builder.base_sequence = base_sequence;
    builder.transactional = true;
    for delta in 0..count {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 1_700_000_000_000,
                key: Some(b"k"),
                value: Some(format!("e{epoch}r{delta}").as_bytes()),
                headers: &[],
            })
            .expect("fits");
    }
    builder.build().expect("builds")
}

async fn produce(client: &mut Connection, topic: &str, records: Vec<u8>) -> anyhow::Result<i16> {
    let request = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(records)))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    Ok(response.responses[0].partition_responses[0].error_code)
}

async fn end_txn(
    client: &mut Connection,
    topic: &str,
    (producer_id, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<i16> {
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_coordinator_epoch(0)
            .with_transaction_result(commit)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![0])])]);
    let response: WriteTxnMarkersResponse =
        client.request(ApiKey::WriteTxnMarkers, 1, &request).await?;
    Ok(response.markers[0].topics[0].partitions[0].error_code)
}

/// A legacy Fetch at `version` from offset 0: (error, high watermark, (offset, value) of each
/// message).
async fn legacy_read(
    client: &mut Connection,
    topic: &str,
    version: i16,
) -> anyhow::Result<(i16, i64, Vec<(i64, String)>)> {
    legacy_read_at(client, topic, version, 1 << 20).await
}

/// A legacy Fetch at `version` from offset 0 with `partition_max_bytes`.
async fn legacy_read_at(
    client: &mut Connection,
    topic: &str,
    version: i16,
    partition_max_bytes: i32,
) -> anyhow::Result<(i16, i64, Vec<(i64, String)>)> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(partition_max_bytes)])]);
    let response = fetch(client, version, &request).await?;
    let partition = &response.responses[0].partitions[0];
    let bytes = partition.records.clone().unwrap_or_default();
    let records = deep_records(&bytes, &DeepOptions::default())?
        .into_iter()
        .map(|record| {
            let value = String::from_utf8(record.value.unwrap_or_default()).unwrap_or_default();
            (record.offset, value)
        })
        .collect();
    Ok((partition.error_code, partition.high_watermark, records))
}

/// The topic's value and source of the key (DescribeConfigs v4).
async fn described(client: &mut Connection, topic: &str) -> anyhow::Result<(String, i8)> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str(KEY)]))]);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, 4, &request).await?;
    let config = response.results[0]
        .configs
        .iter()
        .find(|config| config.name.as_str() == KEY)
        .ok_or_else(|| anyhow::anyhow!("{KEY} not described"))?;
    let value = config.value.as_ref().map(ToString::to_string);
    Ok((value.unwrap_or_default(), config.config_source))
}

/// Writes an aborted transaction (offsets 0, 1; marker 2), a committed one (3, 4; marker 5) and
/// an open one (6) to `topic`.
async fn write_transactions(client: &mut Connection, topic: &str) -> anyhow::Result<()> {
    let init: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        )
        .await?;
    let producer = init.producer_id.0;
    anyhow::ensure!(produce(client, topic, batch(producer, 0, 2)).await? == 0);
    anyhow::ensure!(end_txn(client, topic, (producer, 1), false).await? == 0);
    anyhow::ensure!(produce(client, topic, batch(producer, 1, 2)).await? == 0);
    anyhow::ensure!(end_txn(client, topic, (producer, 2), true).await? == 0);
    anyhow::ensure!(produce(client, topic, batch(producer, 2, 1)).await? == 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_consumers_read_committed_data_only_when_the_topic_says_so() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "legacy-default", &[]).await?;
    create_topic(&mut client, "legacy-committed", &[(KEY, "read_committed")]).await?;
    assert_eq!(
        described(&mut client, "legacy-default").await?,
        ("read_uncommitted".to_owned(), 5),
        "the broker default (DEFAULT_CONFIG)"
    );
    assert_eq!(
        described(&mut client, "legacy-committed").await?,
        ("read_committed".to_owned(), 1),
        "the topic's own (TOPIC_CONFIG)"
    );
    let refused = create_topic(&mut client, "legacy-bad", &[(KEY, "committed")]).await;
    let error = refused.expect_err("a bad value is refused").to_string();
    assert!(
        error.contains(KEY) && error.contains("read_uncommitted or read_committed"),
        "{error}"
    );

    for topic in ["legacy-default", "legacy-committed"] {
        write_transactions(&mut client, topic).await?;
    }
    for version in 0..=3 {
        // Kafka's behaviour: every data record below the high watermark, aborted and open ones
        // included, markers never.
        let (error, high_watermark, records) =
            legacy_read(&mut client, "legacy-default", version).await?;
        assert_eq!((error, high_watermark), (0, 7), "v{version}");
        let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
        assert_eq!(offsets, vec![0, 1, 3, 4, 6], "v{version} read_uncommitted");
        // read_committed: the committed transaction only, stopping at the open one.
        let (error, high_watermark, records) =
            legacy_read(&mut client, "legacy-committed", version).await?;
        assert_eq!((error, high_watermark), (0, 7), "v{version}");
        assert_eq!(
            records,
            vec![(3, "e1r0".to_owned()), (4, "e1r1".to_owned())],
            "v{version} read_committed"
        );
    }
    broker.stop().await;
    Ok(())
}

/// An aborted transaction of many batches, larger than the legacy consumer's fetch size, then a
/// committed one: with `read_committed` the legacy read moves past the aborted run and answers
/// the committed records (an empty answer would leave an old client fetching offset 0 forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_read_committed_consumer_moves_past_an_aborted_run_larger_than_its_fetch(
) -> anyhow::Result<()> {
    const ABORTED_BATCHES: i32 = 12;
    const RECORDS_PER_BATCH: i32 = 50;
    let broker = TestBroker::start(&[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let topic = "legacy-aborted-run";
    create_topic(&mut client, topic, &[(KEY, "read_committed")]).await?;
    let init: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        )
        .await?;
    let producer = init.producer_id.0;
    for index in 0..ABORTED_BATCHES {
        let records = batch_at(producer, 0, RECORDS_PER_BATCH, index * RECORDS_PER_BATCH);
        anyhow::ensure!(produce(&mut client, topic, records).await? == 0);
    }
    anyhow::ensure!(end_txn(&mut client, topic, (producer, 1), false).await? == 0);
    anyhow::ensure!(produce(&mut client, topic, batch(producer, 1, 2)).await? == 0);
    anyhow::ensure!(end_txn(&mut client, topic, (producer, 2), true).await? == 0);
    let committed_first = i64::from(ABORTED_BATCHES * RECORDS_PER_BATCH) + 1;
    let one_batch = i32::try_from(batch(producer, 0, RECORDS_PER_BATCH).len())?;
    for version in 0..=3 {
        // Two batches' worth per fetch: the aborted run is six fetches long.
        let (error, high_watermark, records) =
            legacy_read_at(&mut client, topic, version, 2 * one_batch).await?;
        assert_eq!(
            (error, high_watermark),
            (0, committed_first + 3),
            "v{version}"
        );
        assert_eq!(
            records,
            vec![
                (committed_first, "e1r0".to_owned()),
                (committed_first + 1, "e1r1".to_owned())
            ],
            "v{version}: past the aborted run to the committed records"
        );
    }
    broker.stop().await;
    Ok(())
}
