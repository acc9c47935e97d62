//! Issue 38, the partition side over the wire: transactional batches produced, ended by
//! WriteTxnMarkers (every advertised version), and read back with read_committed (below the last
//! stable offset, with the aborted transactions) and read_uncommitted (below the high watermark);
//! ListOffsets with the isolation level; Kafka's per-partition marker errors; DescribeProducers
//! (every advertised version) showing the open transaction and the last marker's coordinator.
//! No transaction coordinator takes part (the markers are this test's), so KIP-890's
//! verification is switched off (`transaction.partition.verification.enable=false`), except in
//! the test of the verification itself.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use skiff_bench::client::Connection;
use skiff_protocol::error_code;
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use skiff_tests::{advertised, create_topic, fetch, topic_name, TestBroker};

const TOPIC: &str = "txn";
/// KIP-890's check off: no coordinator here to confirm the test's transactions.
const NO_VERIFICATION: &str = "transaction.partition.verification.enable=false";

/// `count` records from `producer_id` at `epoch` from `sequence`, transactional or not.
fn batch(producer_id: i64, epoch: i16, sequence: i32, count: i32, transactional: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = epoch;
    builder.base_sequence = sequence;
    builder.transactional = transactional;
    for delta in 0..count {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(b"value"),
                headers: &[],
            })
            .expect("fits");
    }
    builder.build().expect("builds")
}

async fn produce(client: &mut Connection, records: Vec<u8>) -> anyhow::Result<(i16, i64)> {
    let request = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(
            kafka_protocol::protocol::StrBytes::from_static_str("tx"),
        )))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(records)))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    let partition = &response.responses[0].partition_responses[0];
    Ok((partition.error_code, partition.base_offset))
}

/// What a Fetch v11 from `offset` at `isolation` answered for the partition.
struct Read {
    error_code: i16,
    high_watermark: i64,
    last_stable_offset: i64,
    records_bytes: usize,
    aborted: Vec<(i64, i64)>,
}

async fn read(client: &mut Connection, offset: i64, isolation: i8) -> anyhow::Result<Read> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let response = fetch(client, 11, &request).await?;
    let partition = &response.responses[0].partitions[0];
    Ok(Read {
        error_code: partition.error_code,
        high_watermark: partition.high_watermark,
        last_stable_offset: partition.last_stable_offset,
        records_bytes: partition.records.as_ref().map_or(0, Bytes::len),
        aborted: partition
            .aborted_transactions
            .iter()
            .flatten()
            .map(|aborted| (aborted.producer_id.0, aborted.first_offset))
            .collect(),
    })
}

async fn latest(client: &mut Connection, isolation: i8) -> anyhow::Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 5, &request).await?;
    let partition = &response.topics[0].partitions[0];
    anyhow::ensure!(partition.error_code == 0, "ListOffsets {partition:?}");
    Ok(partition.offset)
}

/// A WriteTxnMarkers of one marker for partition 0 of `topic`; returns its error code.
async fn end_txn(
    client: &mut Connection,
    version: i16,
    topic: &str,
    (producer_id, epoch, coordinator_epoch): (i64, i16, i32),
    commit: bool,
) -> anyhow::Result<i16> {
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_coordinator_epoch(coordinator_epoch)
            .with_transaction_result(commit)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![0])])]);
    let response: WriteTxnMarkersResponse = client
        .request(ApiKey::WriteTxnMarkers, version, &request)
        .await?;
    let marker = &response.markers[0];
    anyhow::ensure!(marker.producer_id.0 == producer_id, "{marker:?}");
    Ok(marker.topics[0].partitions[0].error_code)
}

/// DescribeProducers of partition 0 of `topic`: (error, [(producer, epoch, coordinator epoch,
/// open transaction's first offset)]).
async fn producers(
    client: &mut Connection,
    version: i16,
    topic: &str,
) -> anyhow::Result<(i16, Vec<(i64, i32, i32, i64)>)> {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(topic))
        .with_partition_indexes(vec![0])]);
    let response: DescribeProducersResponse = client
        .request(ApiKey::DescribeProducers, version, &request)
        .await?;
    let partition = &response.topics[0].partitions[0];
    let active = partition.active_producers.iter();
    let active = active.map(|p| {
        let id = p.producer_id.0;
        (
            id,
            p.producer_epoch,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
    });
    Ok((partition.error_code, active.collect()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_end_transactions_and_read_committed_stops_at_the_last_stable_offset(
) -> anyhow::Result<()> {
    let broker = TestBroker::start(&[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, TOPIC, &[]).await?;
    let init: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        )
        .await?;
    let producer = init.producer_id.0;

    // An open transaction: read_uncommitted sees it, read_committed stops at its first offset.
    assert_eq!(
        produce(&mut client, batch(producer, 0, 0, 2, true)).await?,
        (0, 0)
    );
    let uncommitted = read(&mut client, 0, 0).await?;
    assert_eq!(
        (uncommitted.high_watermark, uncommitted.last_stable_offset),
        (2, 0)
    );
    assert!(uncommitted.records_bytes > 0);
    let committed = read(&mut client, 0, 1).await?;
    assert_eq!((committed.error_code, committed.last_stable_offset), (0, 0));
    assert_eq!(committed.records_bytes, 0, "nothing is stable yet");
    assert_eq!(latest(&mut client, 1).await?, 0);
    assert_eq!(latest(&mut client, 0).await?, 2);
    for version in advertised(&versions, ApiKey::DescribeProducers) {
        let open = producers(&mut client, version, TOPIC).await?;
        assert_eq!(
            open,
            (0, vec![(producer, 0, -1, 0)]),
            "DescribeProducers v{version}"
        );
        let unknown = producers(&mut client, version, "nowhere").await?;
        assert_eq!(unknown.0, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    }
    // Inside the transaction, a non-transactional batch of the producer is INVALID_TXN_STATE.
    let refused = produce(&mut client, batch(producer, 0, 2, 1, false)).await?;
    assert_eq!(refused.0, error_code::INVALID_TXN_STATE);

    // ABORT (TV2: the marker carries the bumped epoch) at every advertised version.
    let marker_versions: Vec<i16> = advertised(&versions, ApiKey::WriteTxnMarkers).collect();
    assert_eq!(
        marker_versions,
        vec![1],
        "Kafka 4.1.1 serves WriteTxnMarkers v1 only"
    );
    let abort = end_txn(&mut client, 1, TOPIC, (producer, 1, 3), false).await?;
    assert_eq!(abort, error_code::NONE);
    let committed = read(&mut client, 0, 1).await?;
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (3, 3)
    );
    assert!(committed.records_bytes > 0);
    assert_eq!(
        committed.aborted,
        vec![(producer, 0)],
        "the aborted transaction is reported"
    );
    assert_eq!(latest(&mut client, 1).await?, 3);

    // The aborted transaction's epoch is fenced; the next transaction starts at sequence 0.
    let stale = produce(&mut client, batch(producer, 0, 2, 1, true)).await?;
    assert_eq!(stale.0, error_code::INVALID_PRODUCER_EPOCH);
    assert_eq!(
        produce(&mut client, batch(producer, 1, 0, 2, true)).await?,
        (0, 3)
    );
    assert_eq!(read(&mut client, 3, 1).await?.last_stable_offset, 3);
    // A zombie coordinator (an older coordinator epoch) is fenced; the live one commits.
    let zombie = end_txn(&mut client, 1, TOPIC, (producer, 2, 2), true).await?;
    assert_eq!(zombie, error_code::TRANSACTION_COORDINATOR_FENCED);
    let commit = end_txn(&mut client, 1, TOPIC, (producer, 2, 3), true).await?;
    assert_eq!(commit, error_code::NONE);
    let committed = read(&mut client, 3, 1).await?;
    assert_eq!(committed.last_stable_offset, 6);
    let ended = producers(&mut client, 0, TOPIC).await?;
    assert_eq!(
        ended,
        (0, vec![(producer, 2, 3, -1)]),
        "no transaction open, coordinator 3"
    );
    assert!(committed.aborted.is_empty(), "{:?}", committed.aborted);
    // An older producer epoch than the partition's is INVALID_PRODUCER_EPOCH.
    let old = end_txn(&mut client, 1, TOPIC, (producer, 1, 3), false).await?;
    assert_eq!(old, error_code::INVALID_PRODUCER_EPOCH);
    // An unknown topic; an isolation byte that is neither 0 nor 1.
    let unknown = end_txn(&mut client, 1, "nowhere", (producer, 2, 3), true).await?;
    assert_eq!(unknown, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        read(&mut client, 0, 2).await?.error_code,
        error_code::INVALID_REQUEST
    );
    broker.stop().await;
    Ok(())
}

/// Client control batches are the coordinator's alone: a Produce carrying one is INVALID_RECORD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_produce_a_marker() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, TOPIC, &[]).await?;
    let marker = skiff_protocol::records::txn::EndTxnMarker {
        producer_id: 1,
        producer_epoch: 0,
        coordinator_epoch: 0,
        marker_type: skiff_protocol::records::txn::MarkerType::Commit,
    };
    let forged = marker.encode_batch(1_000)?;
    assert_eq!(
        produce(&mut client, forged).await?.0,
        error_code::INVALID_RECORD
    );
    broker.stop().await;
    Ok(())
}

/// KIP-890 on: a transactional batch is appended only if its coordinator confirms it; without a
/// reachable coordinator the partition answers NOT_ENOUGH_REPLICAS (retried by producers) and
/// nothing is appended; transactional records without a transactional id are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_transactional_batch_is_not_appended() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, TOPIC, &[]).await?;
    let refused = produce(&mut client, batch(42, 0, 0, 1, true)).await?;
    assert_eq!(refused.0, error_code::NOT_ENOUGH_REPLICAS);
    assert_eq!(
        read(&mut client, 0, 0).await?.high_watermark,
        0,
        "nothing appended"
    );
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch(42, 0, 0, 1, true))))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    // Idempotent, non-transactional batches are not verified.
    assert_eq!(
        produce(&mut client, batch(43, 0, 0, 1, false)).await?,
        (0, 0)
    );
    broker.stop().await;
    Ok(())
}
