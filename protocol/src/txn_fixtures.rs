//! Kafka 4.1.1's own bytes for the transaction messages, as its Java classes
//! (`*RequestData`/`*ResponseData` of kafka-clients 4.1.1, `MessageUtil.toByteBufferAccessor`)
//! write them, against Skiff's decoders and encoders byte for byte: every request decodes and
//! re-encodes to Kafka's bytes, the responses past kafka-protocol 0.15.1 (EndTxn v5, Produce v12,
//! TxnOffsetCommit v5) encode to Kafka's bytes, the peer responses decode, and the ApiVersions
//! feature fields are Kafka's. The Java program that printed them fills each message with the
//! values the tests below name.

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, ListTransactionsResponse, ProduceResponse, ProducerId,
    TopicName, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::requests::{decode_pending_body, Request};
use crate::responses::end_txn::EndTxnResponse;
use crate::responses::txn_peer::{
    decode_add_partitions_to_txn_response, decode_write_txn_markers_response,
};
use crate::responses::{encode_response, with_features, FinalizedFeatures, TransactionVersion};

fn hex(text: &str) -> Bytes {
    assert!(text.len() % 2 == 0);
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect::<Vec<u8>>()
        .into()
}

fn name(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

/// (api, version, Kafka's request body).
const REQUESTS: &[(ApiKey, i16, &str)] = &[
    // "t1", producer 7 epoch 2, topic "a" partitions [0, 1]
    (ApiKey::AddPartitionsToTxn, 2, "000274310000000000000007000200000001000161000000020000000000000001"),
    (ApiKey::AddPartitionsToTxn, 3, "037431000000000000000700020202610300000000000000010000"),
    // one transaction "t1", 7, 2, verify_only, topic "a" partition [3]
    (ApiKey::AddPartitionsToTxn, 4, "0203743100000000000000070002010202610200000003000000"),
    (ApiKey::AddPartitionsToTxn, 5, "0203743100000000000000070002010202610200000003000000"),
    // "t1", 7, 2, group "g"
    (ApiKey::AddOffsetsToTxn, 0, "0002743100000000000000070002000167"),
    (ApiKey::AddOffsetsToTxn, 4, "03743100000000000000070002026700"),
    // "t1", 7, 2, committed
    (ApiKey::EndTxn, 0, "000274310000000000000007000201"),
    (ApiKey::EndTxn, 5, "037431000000000000000700020100"),
    // "t1", "g", 7, 2, generation 4, member "m", no instance, "a" [0 @ 100, leader epoch 3, "md"]
    (ApiKey::TxnOffsetCommit, 5, "03743102670000000000000007000200000004026d000202610200000000000000000000006400000003036d64000000"),
    (ApiKey::TxnOffsetCommit, 0, "0002743100016700000000000000070002000000010001610000000100000000000000000000006400026d64"),
    // producer 7 epoch 2 COMMIT, "a" [0], coordinator epoch 9
    (ApiKey::WriteTxnMarkers, 1, "020000000000000007000201020261020000000000000000090000"),
    (ApiKey::DescribeTransactions, 0, "0303743103743200"),
    // states ["Ongoing"], producers [7], duration 1000 (v1)
    (ApiKey::ListTransactions, 1, "02084f6e676f696e6702000000000000000700000000000003e800"),
    (ApiKey::ListTransactions, 0, "02084f6e676f696e6702000000000000000700"),
    // v1's values and the pattern "tv.*" (v2); then every filter empty and a null pattern
    (ApiKey::ListTransactions, 2, "02084f6e676f696e6702000000000000000700000000000003e80574762e2a00"),
    (ApiKey::ListTransactions, 2, "0101ffffffffffffffff0000"),
    (ApiKey::DescribeProducers, 0, "0202610300000000000000010000"),
    // "t1", acks -1, timeout 30000, "a" partition 0 records [1, 2, 3]
    (ApiKey::Produce, 12, "037431ffff00007530020261020000000004010203000000"),
    // "t1", timeout 60000, producer 7 epoch 2
    (ApiKey::InitProducerId, 5, "0374310000ea600000000000000007000200"),
];

#[test]
fn offset_fetch_require_stable_is_read_from_kafkas_bytes() {
    // Streams' read_committed consumers send require_stable (v7+) and need UNSTABLE_OFFSET_COMMIT
    // while a transactional commit is pending: group "g", topic "a" partition [0], require_stable.
    for (version, body) in [
        (7, "02670202610200000000000100"),
        (8, "020267020261020000000000000100"),
    ] {
        let body = hex(body);
        let Ok(Request::OffsetFetch(fetch)) =
            crate::requests::decode_body(ApiKey::OffsetFetch, version, &body)
        else {
            panic!("OffsetFetch v{version}")
        };
        assert!(fetch.require_stable, "v{version}");
        let again = Request::OffsetFetch(fetch).encode_body(version).unwrap();
        assert_eq!(again.as_ref(), body.as_ref());
    }
}

#[test]
fn kafkas_request_bytes_decode_and_re_encode_to_themselves() {
    for (api_key, version, body) in REQUESTS {
        let body = hex(body);
        let request = decode_pending_body(*api_key, *version, &body)
            .unwrap_or_else(|error| panic!("{api_key:?} v{version}: {error}"));
        let again = request.encode_body(*version).unwrap();
        assert_eq!(again.as_ref(), body.as_ref(), "{api_key:?} v{version}");
    }
}

#[test]
fn kafkas_request_bytes_carry_the_named_values() {
    let decode = |api_key, version| {
        let (_, _, body) = REQUESTS
            .iter()
            .find(|(key, v, _)| *key == api_key && *v == version)
            .unwrap();
        decode_pending_body(api_key, version, &hex(body)).unwrap()
    };
    let Request::AddPartitionsToTxn(batched) = decode(ApiKey::AddPartitionsToTxn, 5) else {
        panic!()
    };
    let transaction = &batched.transactions[0];
    assert_eq!(transaction.transactional_id.0.as_str(), "t1");
    assert_eq!(
        (transaction.producer_id.0, transaction.producer_epoch),
        (7, 2)
    );
    assert!(transaction.verify_only);
    assert_eq!(transaction.topics[0].partitions, vec![3]);
    let Request::AddPartitionsToTxn(client) = decode(ApiKey::AddPartitionsToTxn, 3) else {
        panic!()
    };
    assert_eq!(client.v3_and_below_transactional_id.0.as_str(), "t1");
    assert_eq!(client.v3_and_below_topics[0].partitions, vec![0, 1]);
    let Request::TxnOffsetCommit(commit) = decode(ApiKey::TxnOffsetCommit, 5) else {
        panic!()
    };
    assert_eq!((commit.generation_id, commit.member_id.as_str()), (4, "m"));
    assert_eq!(commit.group_instance_id, None);
    let partition = &commit.topics[0].partitions[0];
    assert_eq!(
        (partition.committed_offset, partition.committed_leader_epoch),
        (100, 3)
    );
    let Request::WriteTxnMarkers(markers) = decode(ApiKey::WriteTxnMarkers, 1) else {
        panic!()
    };
    let marker = &markers.markers[0];
    assert!(marker.transaction_result);
    assert_eq!(marker.coordinator_epoch, 9);
    let Request::ListTransactions(list) = decode(ApiKey::ListTransactions, 1) else {
        panic!()
    };
    assert_eq!(list.base.duration_filter, 1000);
    assert_eq!(list.base.state_filters[0].as_str(), "Ongoing");
    let Request::ListTransactions(patterned) = decode(ApiKey::ListTransactions, 2) else {
        panic!()
    };
    assert_eq!(patterned.base.duration_filter, 1000);
    assert_eq!(patterned.transactional_id_pattern.as_deref(), Some("tv.*"));
    let Request::EndTxn(end) = decode(ApiKey::EndTxn, 5) else {
        panic!()
    };
    assert!(end.committed);
    let Request::Produce(produce) = decode(ApiKey::Produce, 12) else {
        panic!()
    };
    assert_eq!(
        produce.topic_data[0].partition_data[0].records.as_deref(),
        Some(&[1u8, 2, 3][..])
    );
}

/// Encodes `message` as a full frame and returns the body after size prefix and header v1.
fn response_body<M: Encodable>(api_key: ApiKey, version: i16, message: &M) -> Bytes {
    let frame = encode_response(api_key, version, 77, message)
        .unwrap()
        .freeze();
    let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
    assert_eq!(usize::try_from(size).unwrap(), frame.len() - 4);
    // Flexible: response header v1 = correlation id and an empty tag section.
    assert_eq!(&frame[4..9], &[0, 0, 0, 77, 0], "{api_key:?} v{version}");
    frame.slice(9..)
}

#[test]
fn end_txn_v5_response_is_kafkas() {
    let bumped = EndTxnResponse {
        producer_id: ProducerId(7),
        producer_epoch: 3,
        ..EndTxnResponse::default()
    };
    assert_eq!(
        response_body(ApiKey::EndTxn, 5, &bumped),
        hex("0000000000000000000000000007000300")
    );
    // A failed EndTxn: Kafka's defaults (-1, -1) are written, they are not tagged fields.
    let failed = EndTxnResponse {
        throttle_time_ms: 12,
        error_code: 47,
        ..EndTxnResponse::default()
    };
    assert_eq!(
        response_body(ApiKey::EndTxn, 5, &failed),
        hex("0000000c002fffffffffffffffffffff00")
    );
    assert_eq!(
        response_body(ApiKey::EndTxn, 4, &failed),
        hex("0000000c002f00")
    );
    assert_eq!(failed.compute_size(5).unwrap(), 17);
    assert!(failed.compute_size(6).is_err());
    assert!(failed.encode(&mut Vec::new(), -1).is_err());
}

#[test]
fn list_transactions_v2_response_is_v1s() {
    let refused = ListTransactionsResponse::default().with_error_code(128);
    assert_eq!(
        response_body(ApiKey::ListTransactions, 2, &refused),
        hex("000000000080010100")
    );
}

#[test]
fn end_txn_v5_keeps_unknown_tags_in_order() {
    let tagged = EndTxnResponse {
        unknown_tagged_fields: [(9, Bytes::from_static(b"x")), (2, Bytes::new())].into(),
        ..EndTxnResponse::default()
    };
    let mut out = Vec::new();
    tagged.encode(&mut out, 5).unwrap();
    assert_eq!(out.len(), tagged.compute_size(5).unwrap());
    assert_eq!(&out[16..], &[2, 2, 0, 9, 1, b'x']);
}

#[test]
fn produce_v12_response_is_kafkas() {
    let ok = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(TopicName(name("a")))
        .with_partition_responses(vec![PartitionProduceResponse::default()
            .with_index(0)
            .with_base_offset(42)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(0)])]);
    assert_eq!(
        response_body(ApiKey::Produce, 12, &ok),
        hex("02026102000000000000000000000000002affffffffffffffff0000000000000000010000000000000000")
    );
    // NOT_LEADER_OR_FOLLOWER with KIP-951's current leader and node endpoints (tagged fields).
    let moved = ProduceResponse::default()
        .with_responses(vec![TopicProduceResponse::default()
            .with_name(TopicName(name("a")))
            .with_partition_responses(vec![PartitionProduceResponse::default()
                .with_index(1)
                .with_error_code(6)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1)
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(2))
                        .with_leader_epoch(5),
                )])])
        .with_throttle_time_ms(3)
        .with_node_endpoints(vec![NodeEndpoint::default()
            .with_node_id(BrokerId(2))
            .with_host(name("h"))
            .with_port(9092)]);
    assert_eq!(
        response_body(ApiKey::Produce, 12, &moved),
        hex("02026102000000010006ffffffffffffffffffffffffffffffffffffffffffffffff0100010009000000020000000500000000000301000d02000000020268000023840000")
    );
}

#[test]
fn txn_offset_commit_v5_response_is_kafkas() {
    let response = TxnOffsetCommitResponse::default().with_topics(vec![
        TxnOffsetCommitResponseTopic::default()
            .with_name(TopicName(name("a")))
            .with_partitions(vec![TxnOffsetCommitResponsePartition::default()]),
    ]);
    assert_eq!(
        response_body(ApiKey::TxnOffsetCommit, 5, &response),
        hex("0000000002026102000000000000000000")
    );
}

#[test]
fn kafkas_peer_responses_decode() {
    // producer 7: "a" partition 0 ok, partition 1 INVALID_PRODUCER_EPOCH (47)
    let body = hex("020000000000000007020261030000000000000000000001002f00000000");
    let markers = decode_write_txn_markers_response(&body, 1).unwrap();
    let marker = &markers.markers[0];
    assert_eq!(marker.producer_id.0, 7);
    let codes: Vec<(i32, i16)> = marker.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(codes, vec![(0, 0), (1, 47)]);
    let mut again = Vec::new();
    markers.encode(&mut again, 1).unwrap();
    assert_eq!(again, body.as_ref());
    // "t1": "a" partition 3 ok; the same bytes at v4 and v5
    let body = hex("000000000000020374310202610200000003000000000000");
    for version in 4..=5 {
        let added = decode_add_partitions_to_txn_response(&body, version).unwrap();
        let result = &added.results_by_transaction[0];
        assert_eq!(result.transactional_id.0.as_str(), "t1");
        let partition = &result.topic_results[0].results_by_partition[0];
        assert_eq!(
            (partition.partition_index, partition.partition_error_code),
            (3, 0)
        );
        let mut again = Vec::new();
        added.encode(&mut again, version).unwrap();
        assert_eq!(again, body.as_ref());
    }
}

#[test]
fn api_versions_features_are_kafkas() {
    let finalized = FinalizedFeatures {
        epoch: 5,
        transaction_version: TransactionVersion::V2,
    };
    let encode = |response: &ApiVersionsResponse| {
        let mut out = Vec::new();
        response.encode(&mut out, 3).unwrap();
        out
    };
    // A v3 request: `transaction.version`'s supported range starts at 0, so it is left out, as
    // Kafka's broker leaves it out below v4; the finalized level 2 and epoch 5 are there.
    let v3 = with_features(ApiVersionsResponse::default(), 3, finalized);
    assert_eq!(
        encode(&v3),
        hex("000001000000000201080000000000000005021a02147472616e73616374696f6e2e76657273696f6e0002000200").as_ref()
    );
    // From v4 the supported range 0-2 is listed too (the same layout as v3).
    let v4 = with_features(ApiVersionsResponse::default(), 4, finalized);
    assert_eq!(
        encode(&v4),
        hex("0000010000000003001a02147472616e73616374696f6e2e76657273696f6e000000020001080000000000000005021a02147472616e73616374696f6e2e76657273696f6e0002000200").as_ref()
    );
    // Level 0 is not finalized: only the epoch is written. v0-v2 have no feature fields.
    let none = FinalizedFeatures {
        epoch: 1,
        transaction_version: TransactionVersion::V0,
    };
    let level_0 = with_features(ApiVersionsResponse::default(), 3, none);
    assert!(level_0.finalized_features.is_empty());
    assert_eq!(level_0.finalized_features_epoch, 1);
    assert_eq!(
        with_features(ApiVersionsResponse::default(), 2, finalized),
        ApiVersionsResponse::default()
    );
}

#[test]
fn transaction_version_2_needs_every_kip_890_version_switched_on() {
    use crate::api::{decodable, SupportedApi, PENDING_APIS, SUPPORTED_APIS};
    // Level 0 until the classic APIs are all served, 1 with them, 2 once Produce v12 is too.
    let served =
        |table: &[SupportedApi], api_key: ApiKey| table.iter().any(|row| row.api_key == api_key);
    let classic_served = served(SUPPORTED_APIS, ApiKey::WriteTxnMarkers)
        && served(SUPPORTED_APIS, ApiKey::TxnOffsetCommit)
        && served(SUPPORTED_APIS, ApiKey::EndTxn);
    let produce_12 = SUPPORTED_APIS
        .iter()
        .any(|row| row.api_key == ApiKey::Produce && row.supports(12));
    let expected = match (classic_served, produce_12) {
        (false, _) => TransactionVersion::V0,
        (true, false) => TransactionVersion::V1,
        (true, true) => TransactionVersion::V2,
    };
    assert_eq!(TransactionVersion::servable_max(), expected);
    // Every pending row switched on: level 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5 and
    // AddPartitionsToTxn v5 are all there).
    let mut table: Vec<SupportedApi> = SUPPORTED_APIS.to_vec();
    for pending in PENDING_APIS {
        table.retain(|row| row.api_key != pending.api_key);
        table.push(*decodable(pending.api_key).unwrap());
    }
    assert_eq!(
        TransactionVersion::servable_max_of(&table),
        TransactionVersion::V2
    );
    // Any classic API missing: level 0.
    for missing in [
        ApiKey::WriteTxnMarkers,
        ApiKey::TxnOffsetCommit,
        ApiKey::EndTxn,
    ] {
        let mut without: Vec<SupportedApi> = table.clone();
        without.retain(|row| row.api_key != missing);
        assert_eq!(
            TransactionVersion::servable_max_of(&without),
            TransactionVersion::V0,
            "without {missing:?}"
        );
    }
    let mut without_produce_12 = table.clone();
    without_produce_12.retain(|row| row.api_key != ApiKey::Produce);
    without_produce_12.push(SupportedApi {
        version_max: 11,
        ..*crate::api::supported(ApiKey::Produce).unwrap()
    });
    assert_eq!(
        TransactionVersion::servable_max_of(&without_produce_12),
        TransactionVersion::V1
    );
}
