//! Hostile and round-trip inputs for the peer response decoders (Kafka's own bytes are in
//! `crate::txn_fixtures`).

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::*;

fn markers_sample(markers_count: usize, partitions_count: usize) -> WriteTxnMarkersResponse {
    let partitions = (0..partitions_count)
        .map(|index| {
            WritableTxnMarkerPartitionResult::default()
                .with_partition_index(i32::try_from(index).unwrap())
                .with_error_code(if index % 2 == 0 { 0 } else { 47 })
        })
        .collect::<Vec<_>>();
    WriteTxnMarkersResponse::default().with_markers(
        (0..markers_count)
            .map(|marker| {
                WritableTxnMarkerResult::default()
                    .with_producer_id(ProducerId(i64::try_from(marker).unwrap()))
                    .with_topics(vec![WritableTxnMarkerTopicResult::default()
                        .with_name(TopicName(StrBytes::from_static_str("orders")))
                        .with_partitions(partitions.clone())])
            })
            .collect(),
    )
}

fn added_sample(transactions_count: usize) -> AddPartitionsToTxnResponse {
    AddPartitionsToTxnResponse::default()
        .with_throttle_time_ms(1)
        .with_results_by_transaction(
            (0..transactions_count)
                .map(|txn| {
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(format!(
                            "txn-{txn}"
                        ))))
                        .with_topic_results(vec![AddPartitionsToTxnTopicResult::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")))
                            .with_results_by_partition(vec![
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(2)
                                    .with_partition_error_code(53),
                            ])])
                })
                .collect(),
        )
}

fn encode<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut out = Vec::new();
    message.encode(&mut out, version).unwrap();
    Bytes::from(out)
}

#[test]
fn round_trips_and_every_prefix_is_an_error() {
    for (markers, partitions) in [(0, 0), (1, 1), (3, 4)] {
        let sample = markers_sample(markers, partitions);
        let body = encode(&sample, 1);
        assert_eq!(decode_write_txn_markers_response(&body, 1), Ok(sample));
        for cut in 0..body.len() {
            assert!(decode_write_txn_markers_response(&body.slice(..cut), 1).is_err());
        }
    }
    for version in ADD_PARTITIONS_TO_TXN_BATCHED_VERSIONS {
        for count in [0, 1, 5] {
            let sample = added_sample(count);
            let body = encode(&sample, version);
            assert_eq!(
                decode_add_partitions_to_txn_response(&body, version),
                Ok(sample)
            );
            for cut in 0..body.len() {
                assert!(
                    decode_add_partitions_to_txn_response(&body.slice(..cut), version).is_err()
                );
            }
            let mut garbage = body.to_vec();
            garbage.push(0);
            assert!(matches!(
                decode_add_partitions_to_txn_response(&Bytes::from(garbage), version),
                Err(DecodeError::TrailingBytes { .. })
            ));
        }
    }
}

#[test]
fn tiny_input_huge_count_is_an_error() {
    // A compact count of 2^32-2 elements with nothing behind it, at each array in turn.
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
    let markers = Bytes::from(huge.to_vec());
    assert!(matches!(
        decode_write_txn_markers_response(&markers, 1),
        Err(DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. })
    ));
    // one marker, producer 7, then a huge topic count
    let mut topics = vec![2, 0, 0, 0, 0, 0, 0, 0, 7];
    topics.extend_from_slice(&huge);
    assert!(matches!(
        decode_write_txn_markers_response(&Bytes::from(topics), 1),
        Err(DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. })
    ));
    // throttle, error, then a huge transaction count; then one transaction "t" whose topic count
    // is huge; then one topic "a" whose partition count is huge.
    let mut added = vec![0, 0, 0, 0, 0, 0];
    added.extend_from_slice(&huge);
    let mut added_topics = vec![0, 0, 0, 0, 0, 0, 2, 2, b't'];
    added_topics.extend_from_slice(&huge);
    let mut added_partitions = vec![0, 0, 0, 0, 0, 0, 2, 2, b't', 2, 2, b'a'];
    added_partitions.extend_from_slice(&huge);
    for body in [added, added_topics, added_partitions] {
        assert!(matches!(
            decode_add_partitions_to_txn_response(&Bytes::from(body), 5),
            Err(DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. })
        ));
    }
}

#[test]
fn versions_a_broker_never_sends_are_refused() {
    let body = encode(&markers_sample(1, 1), 1);
    assert!(decode_write_txn_markers_response(&body, 0).is_err());
    assert!(decode_write_txn_markers_response(&body, 2).is_err());
    let body = encode(&added_sample(1), 4);
    assert!(decode_add_partitions_to_txn_response(&body, 3).is_err());
    assert!(decode_add_partitions_to_txn_response(&body, 6).is_err());
}
