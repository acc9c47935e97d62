//! Hostile request frames through the broker's entry point, `decode_request`: random bytes behind a
//! valid header, and single-byte corruptions of valid frames, never panic or over-allocate; what is
//! accepted re-encodes with kafka-protocol and decodes to the same value; errors carry the
//! correlation id.

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
use kafka_protocol::messages::{MetadataRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use proptest::prelude::*;
use skiff_protocol::api::{ApiKey, SUPPORTED_APIS};
use skiff_protocol::error::{DecodeError, RequestError};
use skiff_protocol::requests::{decode_body, decode_request, Request};

fn header_bytes(api_key: ApiKey, version: i16, correlation_id: i32) -> BytesMut {
    let row = skiff_protocol::api::supported(api_key).unwrap();
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("hostile")))
        .encode(&mut out, row.request_header_version(version))
        .unwrap();
    out
}

fn check_invariants(frame: &Bytes, correlation_id: i32) {
    match decode_request(frame) {
        Ok((header, request)) => {
            let version = header.request_api_version;
            let body = request.encode_body(version).unwrap().freeze();
            assert_eq!(decode_body(request.api_key(), version, &body), Ok(request));
        }
        Err(error) => assert_eq!(error.correlation_id(), Some(correlation_id)),
    }
}

fn api_and_version() -> impl Strategy<Value = (ApiKey, i16)> {
    (0..SUPPORTED_APIS.len()).prop_flat_map(|index| {
        let row = SUPPORTED_APIS[index];
        (Just(row.api_key), row.version_min..=row.version_max)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bodies_never_panic_and_round_trip(
        (api_key, version) in api_and_version(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        correlation_id: i32,
    ) {
        let mut frame = header_bytes(api_key, version, correlation_id);
        frame.extend_from_slice(&body);
        check_invariants(&frame.freeze(), correlation_id);
    }

    #[test]
    fn corrupted_valid_frames_never_panic_and_round_trip(
        (api_key, version) in api_and_version(),
        position: prop::sample::Index,
        byte: u8,
    ) {
        let body = default_request(api_key).encode_body(version).unwrap();
        let mut frame = header_bytes(api_key, version, 3);
        let header_len = frame.len();
        frame.extend_from_slice(&body);
        if frame.len() > header_len {
            let index = header_len + position.index(frame.len() - header_len);
            frame[index] = byte;
        }
        check_invariants(&frame.freeze(), 3);
    }
}

fn default_request(api_key: ApiKey) -> Request {
    use kafka_protocol::messages::*;
    match api_key {
        ApiKey::Produce => Request::Produce(ProduceRequest::default()),
        ApiKey::Fetch => Request::Fetch(FetchRequest::default()),
        ApiKey::ListOffsets => Request::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::Metadata => Request::Metadata(MetadataRequest::default()),
        ApiKey::OffsetCommit => Request::OffsetCommit(OffsetCommitRequest::default()),
        ApiKey::OffsetFetch => Request::OffsetFetch(OffsetFetchRequest::default()),
        ApiKey::FindCoordinator => Request::FindCoordinator(FindCoordinatorRequest::default()),
        ApiKey::JoinGroup => Request::JoinGroup(JoinGroupRequest::default()),
        ApiKey::Heartbeat => Request::Heartbeat(HeartbeatRequest::default()),
        ApiKey::LeaveGroup => Request::LeaveGroup(LeaveGroupRequest::default()),
        ApiKey::SyncGroup => Request::SyncGroup(SyncGroupRequest::default()),
        ApiKey::DescribeGroups => Request::DescribeGroups(DescribeGroupsRequest::default()),
        ApiKey::ListGroups => Request::ListGroups(ListGroupsRequest::default()),
        ApiKey::SaslHandshake => Request::SaslHandshake(SaslHandshakeRequest::default()),
        ApiKey::ApiVersions => Request::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => Request::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => Request::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::InitProducerId => Request::InitProducerId(InitProducerIdRequest::default()),
        ApiKey::OffsetForLeaderEpoch => {
            Request::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::DescribeConfigs => Request::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::SaslAuthenticate => Request::SaslAuthenticate(SaslAuthenticateRequest::default()),
        ApiKey::AlterConfigs => Request::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::CreatePartitions => Request::CreatePartitions(CreatePartitionsRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            Request::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DeleteRecords => Request::DeleteRecords(DeleteRecordsRequest::default()),
        ApiKey::DescribeLogDirs => Request::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::DeleteGroups => Request::DeleteGroups(DeleteGroupsRequest::default()),
        ApiKey::ListPartitionReassignments => {
            Request::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
        }
        ApiKey::OffsetDelete => Request::OffsetDelete(OffsetDeleteRequest::default()),
        ApiKey::ElectLeaders => Request::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::AlterPartitionReassignments => {
            Request::AlterPartitionReassignments(AlterPartitionReassignmentsRequest::default())
        }
        ApiKey::DescribeClientQuotas => {
            Request::DescribeClientQuotas(DescribeClientQuotasRequest::default())
        }
        ApiKey::AlterClientQuotas => {
            Request::AlterClientQuotas(AlterClientQuotasRequest::default())
        }
        ApiKey::DescribeAcls => Request::DescribeAcls(DescribeAclsRequest::default()),
        ApiKey::CreateAcls => Request::CreateAcls(CreateAclsRequest::default()),
        ApiKey::DeleteAcls => Request::DeleteAcls(DeleteAclsRequest::default()),
        ApiKey::DescribeUserScramCredentials => {
            Request::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => {
            Request::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
        }
        ApiKey::DescribeCluster => {
            Request::DescribeCluster(skiff_protocol::requests::DescribeClusterRequest::default())
        }
        ApiKey::AddPartitionsToTxn => {
            Request::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
        }
        ApiKey::AddOffsetsToTxn => Request::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
        ApiKey::EndTxn => Request::EndTxn(EndTxnRequest::default()),
        ApiKey::DescribeTransactions => {
            Request::DescribeTransactions(DescribeTransactionsRequest::default())
        }
        ApiKey::ListTransactions => {
            Request::ListTransactions(skiff_protocol::requests::ListTransactionsRequest::default())
        }
        ApiKey::TxnOffsetCommit => Request::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
        ApiKey::WriteTxnMarkers => Request::WriteTxnMarkers(WriteTxnMarkersRequest::default()),
        ApiKey::DescribeProducers => {
            Request::DescribeProducers(DescribeProducersRequest::default())
        }
        ApiKey::ConsumerGroupHeartbeat => Request::ConsumerGroupHeartbeat(
            skiff_protocol::requests::ConsumerGroupHeartbeatRequest::default(),
        ),
        ApiKey::ConsumerGroupDescribe => {
            Request::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
        }
        other => panic!("no default for {other:?}"),
    }
}

#[test]
fn tiny_input_huge_count_is_an_error() {
    // The style guide's example: a 4-byte Metadata body 7f ff ff ff, which makes kafka-protocol's
    // own decoder reserve ~154 GB and abort the process.
    for version in 0..=8 {
        let mut frame = header_bytes(ApiKey::Metadata, version, 11);
        frame.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(
            decode_request(&frame.freeze()),
            Err(RequestError::Body {
                correlation_id: 11,
                source: DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. },
                ..
            })
        ));
    }
    let mut frame = header_bytes(ApiKey::Metadata, 9, 11);
    frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(decode_request(&frame.freeze()).is_err());
    let _ = MetadataRequest::default();
}

#[test]
fn unknown_keys_and_versions_are_typed_errors() {
    let frame = Bytes::from_static(&[0x00, 0x63, 0, 0, 0, 0, 0, 4, 0xff, 0xff]);
    assert_eq!(
        decode_request(&frame).unwrap_err(),
        RequestError::UnknownApiKey {
            api_key: 99,
            api_version: 0,
            correlation_id: 4
        }
    );
    let frame = Bytes::from_static(&[0, 1, 0, 14, 0, 0, 0, 4]);
    assert_eq!(
        decode_request(&frame).unwrap_err(),
        RequestError::UnsupportedVersion {
            api_key: 1,
            api_version: 14,
            correlation_id: 4
        }
    );
}
