//! Hostile and mistaken group requests at the wire level: absurd timeouts, unknown member ids,
//! wrong generations, oversized member metadata get Kafka's error codes and never close the
//! connection or stop the broker; idempotent batches that repeat or skip sequences are refused
//! with DUPLICATE acknowledgement or OUT_OF_ORDER_SEQUENCE_NUMBER.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use skiff_tests::{create_topic, TestBroker};

const INVALID_SESSION_TIMEOUT: i16 = 26;
const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_REQUEST: i16 = 42;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const REBALANCE_IN_PROGRESS: i16 = 27;

fn group_id(text: &str) -> GroupId {
    GroupId(StrBytes::from_string(text.to_owned()))
}

fn join(group: &str, session_timeout_ms: i32, rebalance_timeout_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(rebalance_timeout_ms)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(b"meta"))])
}

async fn still_answers(client: &mut Connection) -> anyhow::Result<()> {
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    assert_eq!(response.error_code, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_group_requests_get_error_codes_and_no_panic() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;

    // Absurd timeouts, at JoinGroup v0 (no rebalance timeout) and v1.
    for (version, session, rebalance) in [
        (0, 1, 0),
        (0, i32::MAX, 0),
        (1, -1, 10_000),
        (1, 10_000, -5),
    ] {
        let mut request = join("g-timeouts", session, rebalance);
        if version == 0 {
            request = request.with_rebalance_timeout_ms(-1);
        }
        let response: JoinGroupResponse =
            client.request(ApiKey::JoinGroup, version, &request).await?;
        let want = if !(6_000..=1_800_000).contains(&session) {
            INVALID_SESSION_TIMEOUT
        } else {
            INVALID_REQUEST
        };
        assert_eq!(
            response.error_code, want,
            "v{version} {session} {rebalance}"
        );
    }
    still_answers(&mut client).await?;

    // Oversized member metadata (beyond the 1 MiB bound).
    let mut request = join("g-big", 10_000, 10_000);
    request.protocols[0].metadata = Bytes::from(vec![0u8; 2 * 1024 * 1024]);
    let response: JoinGroupResponse = client.request(ApiKey::JoinGroup, 1, &request).await?;
    assert_eq!(response.error_code, INVALID_REQUEST);
    still_answers(&mut client).await?;

    // An unknown member id joining a group that does not exist.
    let response: JoinGroupResponse = client
        .request(
            ApiKey::JoinGroup,
            1,
            &join("g-nobody", 10_000, 10_000).with_member_id(StrBytes::from_static_str("ghost")),
        )
        .await?;
    assert_eq!(response.error_code, UNKNOWN_MEMBER_ID);

    // A real member, then heartbeats with the wrong generation and an unknown member id.
    let joined: JoinGroupResponse = client
        .request(ApiKey::JoinGroup, 1, &join("g-real", 10_000, 10_000))
        .await?;
    assert_eq!(joined.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(group_id("g-real"))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone());
    let synced: SyncGroupResponse = client.request(ApiKey::SyncGroup, 0, &sync).await?;
    assert_eq!(synced.error_code, 0);
    let heartbeat = |generation_id: i32, member_id: StrBytes| {
        HeartbeatRequest::default()
            .with_group_id(group_id("g-real"))
            .with_generation_id(generation_id)
            .with_member_id(member_id)
    };
    let response: HeartbeatResponse = client
        .request(
            ApiKey::Heartbeat,
            0,
            &heartbeat(joined.generation_id + 7, joined.member_id.clone()),
        )
        .await?;
    assert_eq!(response.error_code, ILLEGAL_GENERATION);
    let response: HeartbeatResponse = client
        .request(
            ApiKey::Heartbeat,
            0,
            &heartbeat(joined.generation_id, StrBytes::from_static_str("ghost")),
        )
        .await?;
    assert_eq!(response.error_code, UNKNOWN_MEMBER_ID);
    // SyncGroup with a wrong generation; OffsetCommit from a stranger.
    let response: SyncGroupResponse = client
        .request(
            ApiKey::SyncGroup,
            0,
            &sync.clone().with_generation_id(joined.generation_id - 1),
        )
        .await?;
    assert_eq!(response.error_code, ILLEGAL_GENERATION);
    let commit = OffsetCommitRequest::default()
        .with_group_id(group_id("g-real"))
        .with_generation_id_or_member_epoch(joined.generation_id)
        .with_member_id(StrBytes::from_static_str("ghost"))
        .with_topics(vec![
            kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("whatever")))
                .with_partitions(vec![
                    kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_committed_offset(5),
                ]),
        ]);
    let response: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 2, &commit).await?;
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        UNKNOWN_MEMBER_ID
    );
    // The real member is still there: a heartbeat succeeds (or asks it to rejoin, never more).
    let response: HeartbeatResponse = client
        .request(
            ApiKey::Heartbeat,
            0,
            &heartbeat(joined.generation_id, joined.member_id.clone()),
        )
        .await?;
    assert!(
        [0, REBALANCE_IN_PROGRESS].contains(&response.error_code),
        "{}",
        response.error_code
    );
    still_answers(&mut client).await?;
    broker.stop().await;
    Ok(())
}

fn idempotent_batch(producer_id: i64, base_sequence: i32, count: i32) -> Bytes {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = base_sequence;
    for index in 0..count {
        builder
            .push(&NewRecord {
                offset_delta: index,
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(b"value"),
                headers: &[],
            })
            .expect("record fits");
    }
    Bytes::from(builder.build().expect("batch builds"))
}

async fn produce(client: &mut Connection, records: Bytes) -> anyhow::Result<(i16, i64)> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("idem")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 7, &request).await?;
    let partition = &response.responses[0].partition_responses[0];
    Ok((partition.error_code, partition.base_offset))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retries_are_acknowledged_once_and_gaps_refused() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "idem", &[]).await?;
    let init: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        )
        .await?;
    assert_eq!(init.error_code, 0);
    let producer_id = init.producer_id.0;

    assert_eq!(
        produce(&mut client, idempotent_batch(producer_id, 0, 3)).await?,
        (0, 0)
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(producer_id, 3, 2)).await?,
        (0, 3)
    );
    // A retry of the first batch: acknowledged with its original offset, not appended again.
    assert_eq!(
        produce(&mut client, idempotent_batch(producer_id, 0, 3)).await?,
        (0, 0)
    );
    // A gap.
    let (code, _) = produce(&mut client, idempotent_batch(producer_id, 9, 1)).await?;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    // The next in order lands right after the first two: nothing was appended twice.
    assert_eq!(
        produce(&mut client, idempotent_batch(producer_id, 5, 1)).await?,
        (0, 5)
    );
    broker.stop().await;
    Ok(())
}
