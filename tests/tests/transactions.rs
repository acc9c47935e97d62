//! The transaction coordinator over the wire on a single node: FindCoordinator for a
//! transactional id (creating `__transaction_state`), InitProducerId (epochs, fencing, the
//! timeout bound), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
//! ListTransactions, and the coordinator's state surviving a restart (replayed from
//! `__transaction_state`). The markers themselves are the partition side's (WriteTxnMarkers);
//! until it is served here, a committed transaction stays in PrepareCommit, which is what a
//! coordinator whose markers are not written yet must show.

use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, ApiVersionsRequest, ApiVersionsResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, InitProducerIdRequest,
    InitProducerIdResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_protocol::error_code;
use skiff_tests::{create_topic, topic_name, TestBroker};

const ID: &str = "txn-e2e";

fn txn_id(text: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(text.to_owned()))
}

/// InitProducerId v3, retried while the coordinator loads its partition (as clients retry).
async fn init(
    client: &mut Connection,
    id: &str,
    timeout_ms: i32,
) -> anyhow::Result<InitProducerIdResponse> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    for _ in 0..100 {
        let response: InitProducerIdResponse =
            client.request(ApiKey::InitProducerId, 3, &request).await?;
        let retriable = [
            error_code::COORDINATOR_LOAD_IN_PROGRESS,
            error_code::NOT_COORDINATOR,
            error_code::COORDINATOR_NOT_AVAILABLE,
        ];
        if !retriable.contains(&response.error_code) {
            return Ok(response);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the coordinator never loaded")
}

/// FindCoordinator v1 for transactional id `id`: the first creates `__transaction_state`.
async fn find_transaction_coordinator(client: &mut Connection, id: &str) -> anyhow::Result<()> {
    let found: FindCoordinatorResponse = client
        .request(
            ApiKey::FindCoordinator,
            1,
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(id.to_owned()))
                .with_key_type(1),
        )
        .await?;
    anyhow::ensure!(
        found.error_code == 0,
        "FindCoordinator for {id}: {}",
        found.error_code
    );
    Ok(())
}

async fn describe(
    client: &mut Connection,
    id: &str,
) -> anyhow::Result<DescribeTransactionsResponse> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    client
        .request(ApiKey::DescribeTransactions, 0, &request)
        .await
}

async fn add_partition(
    client: &mut Connection,
    producer: (i64, i16),
    topic: &str,
) -> anyhow::Result<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(ID))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![0])]);
    let response: AddPartitionsToTxnResponse = client
        .request(ApiKey::AddPartitionsToTxn, 3, &request)
        .await?;
    Ok(response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
}

#[tokio::test]
async fn a_transaction_is_coordinated_over_the_wire_and_survives_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let broker =
        TestBroker::start_in(dir.path(), &["transaction.state.log.num.partitions=5"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    // The coordinator of a transactional id is this broker; __transaction_state is created.
    let found: FindCoordinatorResponse = client
        .request(
            ApiKey::FindCoordinator,
            1,
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str(ID))
                .with_key_type(1),
        )
        .await?;
    assert_eq!(found.error_code, 0, "{:?}", found.error_message);
    assert_eq!(found.node_id.0, 1);
    // A timeout above transaction.max.timeout.ms is refused.
    let refused = init(&mut client, ID, 900_001).await?;
    assert_eq!(refused.error_code, error_code::INVALID_TRANSACTION_TIMEOUT);
    let first = init(&mut client, ID, 60_000).await?;
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    // A second InitProducerId bumps the epoch: the first producer is fenced.
    let second = init(&mut client, ID, 60_000).await?;
    assert_eq!(second.producer_id, first.producer_id);
    assert_eq!(second.producer_epoch, 1);
    let producer = (second.producer_id.0, second.producer_epoch);
    create_topic(&mut client, "orders", &[]).await?;
    assert_eq!(
        add_partition(
            &mut client,
            (first.producer_id.0, first.producer_epoch),
            "orders"
        )
        .await?,
        error_code::PRODUCER_FENCED,
        "the first producer is fenced"
    );
    assert_eq!(add_partition(&mut client, producer, "orders").await?, 0);
    assert_eq!(
        add_partition(&mut client, producer, "missing").await?,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );
    let offsets: AddOffsetsToTxnResponse = client
        .request(
            ApiKey::AddOffsetsToTxn,
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(ID))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_group_id(GroupId(StrBytes::from_static_str("readers"))),
        )
        .await?;
    assert_eq!(offsets.error_code, 0);
    let described = describe(&mut client, ID).await?;
    let state = &described.transaction_states[0];
    assert_eq!(state.error_code, 0);
    assert_eq!(state.transaction_state.as_str(), "Ongoing");
    assert_eq!(state.producer_epoch, 1);
    let topics: Vec<&str> = state.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(topics, vec!["__consumer_offsets", "orders"]);
    // Commit: answered once PrepareCommit is durable.
    let end = EndTxnRequest::default()
        .with_transactional_id(txn_id(ID))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(true);
    let ended: EndTxnResponse = client.request(ApiKey::EndTxn, 3, &end).await?;
    assert_eq!(ended.error_code, 0);
    let after_end = describe(&mut client, ID).await?.transaction_states[0].clone();
    assert!(
        ["PrepareCommit", "CompleteCommit"].contains(&after_end.transaction_state.as_str()),
        "{after_end:?}"
    );
    // An abort now is the wrong state for that transaction.
    let abort = end.clone().with_committed(false);
    let wrong: EndTxnResponse = client.request(ApiKey::EndTxn, 3, &abort).await?;
    assert_ne!(wrong.error_code, 0);
    let listed: ListTransactionsResponse = client
        .request(
            ApiKey::ListTransactions,
            1,
            &ListTransactionsRequest::default().with_duration_filter(-1),
        )
        .await?;
    assert_eq!(listed.error_code, 0);
    assert!(
        listed
            .transaction_states
            .iter()
            .any(|listed| listed.transactional_id.as_str() == ID
                && listed.producer_id.0 == producer.0)
    );
    // Idempotent producers still get fresh ids from the same supply.
    let idempotent: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(-1),
        )
        .await?;
    assert_eq!(idempotent.error_code, 0);
    assert_ne!(idempotent.producer_id, first.producer_id);
    // ApiVersions finalizes the transaction.version the advertised table serves (level 0 is
    // left out of the list, as Kafka does).
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await?;
    let finalized = versions
        .finalized_features
        .iter()
        .find(|feature| feature.name.as_str() == "transaction.version")
        .map(|feature| feature.max_version_level)
        .unwrap_or(0);
    assert_eq!(
        finalized,
        skiff_protocol::responses::TransactionVersion::servable_max() as i16
    );
    broker.stop().await;

    // After a restart the coordinator replays __transaction_state: the same state and epoch.
    let broker =
        TestBroker::start_in(dir.path(), &["transaction.state.log.num.partitions=5"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let mut reloaded = None;
    for _ in 0..100 {
        let state = describe(&mut client, ID).await?.transaction_states[0].clone();
        if state.error_code == 0 {
            reloaded = Some(state);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reloaded = reloaded.expect("the transactional id is described after the restart");
    assert_eq!(reloaded.producer_id.0, producer.0);
    assert_eq!(reloaded.producer_epoch, producer.1);
    assert!(
        ["PrepareCommit", "CompleteCommit"].contains(&reloaded.transaction_state.as_str()),
        "{reloaded:?}"
    );
    broker.stop().await;
    Ok(())
}

/// A request kafka-protocol 0.15.1 cannot encode at a version past its range (EndTxn v5), encoded
/// as the crate's version with the same bytes (`api::request_crate_version`).
struct PastCrate<'a, R>(ApiKey, &'a R);

impl<R: kafka_protocol::protocol::Encodable> kafka_protocol::protocol::Encodable
    for PastCrate<'_, R>
{
    fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
        &self,
        buf: &mut B,
        version: i16,
    ) -> anyhow::Result<()> {
        let version = skiff_protocol::api::request_crate_version(self.0, version);
        self.1.encode(buf, version)
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        let version = skiff_protocol::api::request_crate_version(self.0, version);
        self.1.compute_size(version)
    }
}

/// EndTxn v5, whose request and response kafka-protocol 0.15.1 cannot encode or decode: the
/// request as v4's bytes, the response's fields read by hand.
async fn end_v5(
    client: &mut Connection,
    request: EndTxnRequest,
) -> anyhow::Result<skiff_protocol::responses::end_txn::EndTxnResponse> {
    let correlation_id = client
        .send(ApiKey::EndTxn, 5, &PastCrate(ApiKey::EndTxn, &request))
        .await?;
    let frame = client.receive_frame().await?;
    anyhow::ensure!(frame.len() >= 4 + 1 + 16, "short EndTxn v5 response");
    anyhow::ensure!(frame[..4] == correlation_id.to_be_bytes(), "correlation id");
    let body = &frame[5..];
    Ok(skiff_protocol::responses::end_txn::EndTxnResponse {
        throttle_time_ms: i32::from_be_bytes(body[0..4].try_into()?),
        error_code: i16::from_be_bytes(body[4..6].try_into()?),
        producer_id: ProducerId(i64::from_be_bytes(body[6..14].try_into()?)),
        producer_epoch: i16::from_be_bytes(body[14..16].try_into()?),
        ..Default::default()
    })
}

/// Transaction version 2 over the wire: the partition added by a leader's AddPartitionsToTxn v5
/// (KIP-890's implicit add for Produce v12), EndTxn v5 bumping the epoch at every end and
/// answering with it, an abort with nothing added, and the old epoch fenced.
#[tokio::test]
async fn transaction_version_2_bumps_the_epoch_at_every_end() -> anyhow::Result<()> {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    let broker = TestBroker::start(&["transaction.state.log.num.partitions=1"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let id = "tv2";
    find_transaction_coordinator(&mut client, id).await?;
    create_topic(&mut client, "events", &[]).await?;
    let init = init(&mut client, id, 60_000).await?;
    assert_eq!(init.error_code, 0);
    let (producer_id, epoch) = (init.producer_id, init.producer_epoch);
    let add = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(producer_id)
            .with_producer_epoch(epoch)
            .with_verify_only(false)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name("events"))
                .with_partitions(vec![0])]),
    ]);
    let added: AddPartitionsToTxnResponse =
        client.request(ApiKey::AddPartitionsToTxn, 5, &add).await?;
    let result = &added.results_by_transaction[0].topic_results[0].results_by_partition[0];
    assert_eq!(result.partition_error_code, 0);
    let end = |epoch: i16, committed: bool| {
        EndTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(producer_id)
            .with_producer_epoch(epoch)
            .with_committed(committed)
    };
    let committed = end_v5(&mut client, end(epoch, true)).await?;
    assert_eq!(committed.error_code, 0);
    assert_eq!(committed.producer_id, producer_id);
    assert_eq!(
        committed.producer_epoch,
        epoch + 1,
        "the epoch bumps at the end"
    );
    // The commit's markers go out on their own; until they are written the transaction is in
    // PrepareCommit, where an end at the bumped epoch is fenced. Wait for CompleteCommit (the
    // state machine's tests in skiff-txn cover the PrepareCommit answers without a race).
    wait_for_state(&mut client, id, "CompleteCommit").await?;
    // A retry of the commit (the epoch before its bump) is recognised, not a new end.
    let retried = end_v5(&mut client, end(epoch, true)).await?;
    assert_eq!(retried.error_code, 0, "a retried commit is answered NONE");
    assert_eq!(retried.producer_epoch, epoch + 1);
    // An abort with nothing added is allowed with transaction version 2, and bumps again.
    let aborted = end_v5(&mut client, end(epoch + 1, false)).await?;
    assert_eq!(aborted.error_code, 0);
    assert_eq!(aborted.producer_epoch, epoch + 2);
    // The epoch before the commit's bump is fenced for a new transaction.
    let stale = end_v5(&mut client, end(epoch - 1, true)).await?;
    assert_eq!(stale.error_code, error_code::PRODUCER_FENCED);
    broker.stop().await;
    Ok(())
}

/// Polls DescribeTransactions until `id` is in `state`, for at most ten seconds.
async fn wait_for_state(client: &mut Connection, id: &str, state: &str) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let described = describe(client, id).await?.transaction_states[0].clone();
        if described.transaction_state.as_str() == state {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{id} stayed in {} instead of reaching {state}",
            described.transaction_state.as_str()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// ListTransactions v2's transactional-id pattern (KIP-1152) matches whole ids, an invalid one is
/// INVALID_REGULAR_EXPRESSION.
#[tokio::test]
async fn list_transactions_v2_filters_by_pattern() -> anyhow::Result<()> {
    use skiff_protocol::requests::ListTransactionsRequest as ListV2;
    let broker = TestBroker::start(&["transaction.state.log.num.partitions=1"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    // The first FindCoordinator for a transactional id creates __transaction_state.
    find_transaction_coordinator(&mut client, "orders-1").await?;
    for id in ["orders-1", "orders-2", "payments-1"] {
        assert_eq!(init(&mut client, id, 60_000).await?.error_code, 0, "{id}");
    }
    let list = |pattern: Option<&'static str>| ListV2 {
        base: ListTransactionsRequest::default().with_duration_filter(-1),
        transactional_id_pattern: pattern.map(StrBytes::from_static_str),
    };
    let listed = async |client: &mut Connection, pattern| -> anyhow::Result<(i16, Vec<String>)> {
        let response: ListTransactionsResponse = client
            .request(ApiKey::ListTransactions, 2, &list(pattern))
            .await?;
        let mut ids: Vec<String> = response
            .transaction_states
            .iter()
            .map(|state| state.transactional_id.to_string())
            .collect();
        ids.sort();
        Ok((response.error_code, ids))
    };
    let (error, ids) = listed(&mut client, Some("orders-.*")).await?;
    assert_eq!(
        (error, ids),
        (0, vec!["orders-1".into(), "orders-2".into()])
    );
    let (_, ids) = listed(&mut client, Some("orders")).await?;
    assert!(ids.is_empty(), "a partial match is no match: {ids:?}");
    let (_, ids) = listed(&mut client, None).await?;
    assert_eq!(ids.len(), 3);
    let (error, ids) = listed(&mut client, Some("orders-[")).await?;
    assert_eq!(error, error_code::INVALID_REGULAR_EXPRESSION);
    assert!(ids.is_empty());

    broker.stop().await;
    Ok(())
}

/// The versions ApiVersions advertises for `api_key`.
fn advertised(versions: &ApiVersionsResponse, api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let entry = versions
        .api_keys
        .iter()
        .find(|entry| entry.api_key == api_key as i16)
        .unwrap_or_else(|| panic!("{api_key:?} is not advertised"));
    entry.min_version..=entry.max_version
}

/// Every advertised version of the coordinator's APIs is answered, with the error Kafka gives a
/// transactional id the coordinator does not know (it is loaded: another id was initialized).
#[tokio::test]
async fn every_advertised_version_of_the_coordinator_apis_answers() -> anyhow::Result<()> {
    let broker = TestBroker::start(&["transaction.state.log.num.partitions=1"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, "t", &[]).await?;
    find_transaction_coordinator(&mut client, "warm-up").await?;
    let warm = init(&mut client, "warm-up", 60_000).await?;
    assert_eq!(warm.error_code, 0);
    let unknown = txn_id("never-initialized");
    let topics = vec![AddPartitionsToTxnTopic::default()
        .with_name(topic_name("t"))
        .with_partitions(vec![0])];
    for version in advertised(&versions, ApiKey::AddPartitionsToTxn) {
        let request = if version >= 4 {
            AddPartitionsToTxnRequest::default().with_transactions(vec![
                kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(unknown.clone())
                    .with_producer_id(ProducerId(5))
                    .with_producer_epoch(0)
                    .with_verify_only(true)
                    .with_topics(topics.clone()),
            ])
        } else {
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(unknown.clone())
                .with_v3_and_below_producer_id(ProducerId(5))
                .with_v3_and_below_topics(topics.clone())
        };
        let response: AddPartitionsToTxnResponse = client
            .request(ApiKey::AddPartitionsToTxn, version, &request)
            .await?;
        let results = if version >= 4 {
            assert_eq!(response.error_code, 0, "AddPartitionsToTxn v{version}");
            response.results_by_transaction[0].topic_results.clone()
        } else {
            response.results_by_topic_v3_and_below.clone()
        };
        assert_eq!(
            results[0].results_by_partition[0].partition_error_code,
            error_code::INVALID_PRODUCER_ID_MAPPING,
            "AddPartitionsToTxn v{version}"
        );
    }
    for version in advertised(&versions, ApiKey::AddOffsetsToTxn) {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(unknown.clone())
            .with_producer_id(ProducerId(5))
            .with_group_id(GroupId(StrBytes::from_static_str("g")));
        let response: AddOffsetsToTxnResponse = client
            .request(ApiKey::AddOffsetsToTxn, version, &request)
            .await?;
        assert_eq!(
            response.error_code,
            error_code::INVALID_PRODUCER_ID_MAPPING,
            "AddOffsetsToTxn v{version}"
        );
    }
    for version in advertised(&versions, ApiKey::EndTxn) {
        let request = EndTxnRequest::default()
            .with_transactional_id(unknown.clone())
            .with_producer_id(ProducerId(5))
            .with_committed(true);
        let error_code = if version >= 5 {
            end_v5(&mut client, request).await?.error_code
        } else {
            let response: EndTxnResponse =
                client.request(ApiKey::EndTxn, version, &request).await?;
            response.error_code
        };
        assert_eq!(
            error_code,
            error_code::INVALID_PRODUCER_ID_MAPPING,
            "EndTxn v{version}"
        );
    }
    for version in advertised(&versions, ApiKey::DescribeTransactions) {
        let request =
            DescribeTransactionsRequest::default().with_transactional_ids(vec![unknown.clone()]);
        let response: DescribeTransactionsResponse = client
            .request(ApiKey::DescribeTransactions, version, &request)
            .await?;
        assert_eq!(
            response.transaction_states[0].error_code,
            error_code::TRANSACTIONAL_ID_NOT_FOUND,
            "DescribeTransactions v{version}"
        );
    }
    for version in advertised(&versions, ApiKey::ListTransactions) {
        // Skiff's own request type: kafka-protocol 0.15.1 stops at v1 (v2's response is v1's).
        let request = skiff_protocol::requests::ListTransactionsRequest {
            base: ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Empty")])
                .with_duration_filter(-1),
            ..Default::default()
        };
        let response: ListTransactionsResponse = client
            .request(ApiKey::ListTransactions, version, &request)
            .await?;
        assert_eq!(response.error_code, 0, "ListTransactions v{version}");
        assert_eq!(
            response.transaction_states.len(),
            1,
            "ListTransactions v{version}"
        );
    }
    broker.stop().await;
    Ok(())
}

/// `count` transactional records of `producer`, from `sequence`.
fn transactional_batch(producer: (i64, i16), sequence: i32, count: i32) -> Vec<u8> {
    use skiff_protocol::records::record::{BatchBuilder, NewRecord};
    let mut builder = BatchBuilder::new(0, skiff_protocol::records::Compression::None);
    builder.producer_id = producer.0;
    builder.producer_epoch = producer.1;
    builder.base_sequence = sequence;
    builder.transactional = true;
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

/// Produce v9 of `records` to partition 0 of `topic` for transactional id [`ID`]: its error.
async fn produce_transactional(
    client: &mut Connection,
    topic: &str,
    records: Vec<u8>,
) -> anyhow::Result<i16> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id(ID)))
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(bytes::Bytes::from(records)))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    Ok(response.responses[0].partition_responses[0].error_code)
}

/// A read_committed Fetch v11 of partition 0 of `topic` from 0: (last stable offset, high
/// watermark, aborted transactions' (producer id, first offset)).
async fn read_committed(
    client: &mut Connection,
    topic: &str,
) -> anyhow::Result<(i64, i64, Vec<(i64, i64)>)> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest};
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response = skiff_tests::fetch(client, 11, &request).await?;
    let partition = &response.responses[0].partitions[0];
    anyhow::ensure!(partition.error_code == 0, "Fetch {}", partition.error_code);
    let aborted = partition
        .aborted_transactions
        .iter()
        .flatten()
        .map(|aborted| (aborted.producer_id.0, aborted.first_offset))
        .collect();
    Ok((
        partition.last_stable_offset,
        partition.high_watermark,
        aborted,
    ))
}

/// End to end on one node with transaction version 1: a transaction's records are produced
/// (the leader checks them with the coordinator, KIP-890), invisible to read_committed until the
/// commit, whose COMMIT marker the coordinator writes to the partition; an aborted transaction's
/// records are listed among the aborted transactions once its ABORT marker is written.
#[tokio::test]
async fn committed_and_aborted_transactions_end_with_markers_on_their_partition(
) -> anyhow::Result<()> {
    let broker = TestBroker::start(&["transaction.state.log.num.partitions=3"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    find_transaction_coordinator(&mut client, ID).await?;
    let topic = "ledger";
    create_topic(&mut client, topic, &[]).await?;
    let init = init(&mut client, ID, 60_000).await?;
    let producer = (init.producer_id.0, init.producer_epoch);
    assert_eq!(add_partition(&mut client, producer, topic).await?, 0);
    let records = transactional_batch(producer, 0, 3);
    assert_eq!(produce_transactional(&mut client, topic, records).await?, 0);
    let (stable, high_watermark, _) = read_committed(&mut client, topic).await?;
    assert_eq!((stable, high_watermark), (0, 3), "open: nothing is stable");
    let end = EndTxnRequest::default()
        .with_transactional_id(txn_id(ID))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1);
    let committed: EndTxnResponse = client
        .request(ApiKey::EndTxn, 3, &end.clone().with_committed(true))
        .await?;
    assert_eq!(committed.error_code, 0);
    wait_for_state(&mut client, ID, "CompleteCommit").await?;
    let (stable, high_watermark, aborted) = read_committed(&mut client, topic).await?;
    assert_eq!(
        (stable, high_watermark),
        (4, 4),
        "3 records and the COMMIT marker"
    );
    assert!(aborted.is_empty());
    // A second transaction, aborted: its records are listed as aborted for read_committed.
    assert_eq!(add_partition(&mut client, producer, topic).await?, 0);
    let records = transactional_batch(producer, 3, 2);
    assert_eq!(produce_transactional(&mut client, topic, records).await?, 0);
    let ended: EndTxnResponse = client
        .request(ApiKey::EndTxn, 3, &end.with_committed(false))
        .await?;
    assert_eq!(ended.error_code, 0);
    wait_for_state(&mut client, ID, "CompleteAbort").await?;
    let (stable, high_watermark, aborted) = read_committed(&mut client, topic).await?;
    assert_eq!(
        (stable, high_watermark),
        (7, 7),
        "2 records and the ABORT marker"
    );
    assert_eq!(aborted, vec![(producer.0, 4)]);
    broker.stop().await;
    Ok(())
}
