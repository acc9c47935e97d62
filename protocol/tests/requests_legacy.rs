//! The request sequences real legacy clients send (docs/design/clients.md §2a,
//! docs/design/downconversion.md §7.1), built with kafka-protocol's client-side encoder and decoded
//! by Skiff's entry point.

// Test code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml exempts #[test] functions but not the helpers beside them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use skiff_protocol::requests::{decode_request, Request};

fn frame(request: &Request, version: i16, correlation_id: i32) -> Bytes {
    let api_key = request.api_key();
    let row = skiff_protocol::api::supported(api_key).unwrap();
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("kafka-python-0.10.1")))
        .encode(&mut out, row.request_header_version(version))
        .unwrap();
    out.extend_from_slice(&request.encode_body(version).unwrap());
    out.freeze()
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("events"))
}

fn group() -> GroupId {
    GroupId(StrBytes::from_static_str("g"))
}

#[test]
fn a_0_10_1_group_consume_session_decodes() {
    let sequence: Vec<(Request, i16)> = vec![
        (Request::ApiVersions(ApiVersionsRequest::default()), 0),
        (
            Request::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
            ]))),
            2,
        ),
        (
            Request::FindCoordinator(FindCoordinatorRequest::default().with_key("g".into())),
            0,
        ),
        (
            Request::JoinGroup(
                JoinGroupRequest::default()
                    .with_group_id(group())
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(300_000)
                    .with_protocol_type("consumer".into())
                    .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                    )
                    .with_name("range".into())
                    .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 6]))]),
            ),
            1,
        ),
        (
            Request::SyncGroup(
                SyncGroupRequest::default()
                    .with_group_id(group())
                    .with_generation_id(1),
            ),
            0,
        ),
        (
            Request::OffsetFetch(
                OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(topic())
                            .with_partition_indexes(vec![0, 1]),
                    ])),
            ),
            1,
        ),
        (
            Request::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_timestamp(-2),
                        ]),
                ])),
            1,
        ),
        (
            Request::Fetch(
                FetchRequest::default()
                    .with_max_wait_ms(500)
                    .with_min_bytes(1)
                    .with_max_bytes(52_428_800)
                    .with_topics(vec![fetch_request::FetchTopic::default()
                        .with_topic(topic())
                        .with_partitions(vec![fetch_request::FetchPartition::default()
                            .with_fetch_offset(42)
                            .with_partition_max_bytes(1_048_576)])]),
            ),
            3,
        ),
        (
            Request::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(group())
                    .with_generation_id(1),
            ),
            0,
        ),
        (
            Request::OffsetCommit(
                OffsetCommitRequest::default()
                    .with_group_id(group())
                    .with_generation_id_or_member_epoch(1)
                    .with_retention_time_ms(-1)
                    .with_topics(vec![
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_committed_offset(43)
                                    .with_committed_metadata(Some("".into())),
                            ]),
                    ]),
            ),
            2,
        ),
        (
            Request::LeaveGroup(LeaveGroupRequest::default().with_group_id(group())),
            0,
        ),
    ];
    for (correlation_id, (request, version)) in (1..).zip(sequence) {
        let (header, decoded) = decode_request(&frame(&request, version, correlation_id)).unwrap();
        assert_eq!(header.correlation_id, correlation_id);
        assert_eq!(header.request_api_version, version);
        assert_eq!(decoded, request);
    }
}

#[test]
fn legacy_produce_and_list_offsets_v0() {
    // pykafka always sends Produce v0; librdkafka's 0.9.0 fallback sends ListOffsets v0 with
    // max_num_offsets.
    let produce = Request::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from_static(&[0; 34]))),
                ])]),
    );
    assert_eq!(decode_request(&frame(&produce, 0, 5)).unwrap().1, produce);
    let list = Request::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()
                    .with_timestamp(-1)
                    .with_max_num_offsets(1)]),
        ]));
    let Request::ListOffsets(decoded) = decode_request(&frame(&list, 0, 6)).unwrap().1 else {
        panic!()
    };
    assert_eq!(decoded.topics[0].partitions[0].max_num_offsets, 1);
}
