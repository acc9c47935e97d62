//! Fuzz bodies for the transaction protocol (issue 38).
//!
//! `txn_request`: the first four bytes name an api key and version, the rest is a request body;
//! [`decode_pending_body`] (every decoder, including those staged in `api::PENDING_APIS` before
//! their handlers land: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
//! TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions v0–v2, Produce
//! v10–v12, InitProducerId v5) never panics or over-allocates; whatever it accepts re-encodes
//! with kafka-protocol's encoder (versions past the crate as the crate's version with the same
//! bytes, or through Skiff's own type where the version adds fields: ListTransactions v2)
//! and decodes again to the same value.
//! `txn_peer_response`: the first byte picks WriteTxnMarkers v1 or AddPartitionsToTxn v4/v5, the
//! rest is a response body a broker reads from a peer; the bounded decoders never panic or
//! over-allocate, and what they accept re-encodes with kafka-protocol and decodes to the same
//! value.

use bytes::Bytes;
use kafka_protocol::protocol::Encodable;
use skiff_protocol::api::ApiKey;
use skiff_protocol::requests::decode_pending_body;
use skiff_protocol::responses::txn_peer::{
    decode_add_partitions_to_txn_response, decode_write_txn_markers_response,
};

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[
    ("txn_request", txn_request),
    ("txn_peer_response", txn_peer_response),
];

/// Request body decoding round trip over every decoder, staged or switched on.
pub fn txn_request(data: &[u8]) {
    let Some((start, body)) = data.split_first_chunk::<4>() else {
        return;
    };
    let Ok(api_key) = ApiKey::try_from(i16::from_be_bytes([start[0], start[1]])) else {
        return;
    };
    let version = i16::from_be_bytes([start[2], start[3]]);
    let body = Bytes::copy_from_slice(body);
    let Ok(request) = decode_pending_body(api_key, version, &body) else {
        return;
    };
    let encoded = request
        .encode_body(version)
        .unwrap_or_else(|error| panic!("accepted {request:?} does not re-encode: {error}"))
        .freeze();
    let again = decode_pending_body(api_key, version, &encoded)
        .unwrap_or_else(|error| panic!("re-encoded {request:?} does not decode: {error}"));
    assert_eq!(again, request);
}

/// Peer response decoding round trip.
pub fn txn_peer_response(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let body = Bytes::copy_from_slice(body);
    match selector % 3 {
        0 => {
            let Ok(response) = decode_write_txn_markers_response(&body, 1) else {
                return;
            };
            let again = decode_write_txn_markers_response(&reencode(&response, 1), 1);
            assert_eq!(again.as_ref(), Ok(&response));
        }
        choice => {
            let version = 3 + i16::from(choice);
            let Ok(response) = decode_add_partitions_to_txn_response(&body, version) else {
                return;
            };
            let again =
                decode_add_partitions_to_txn_response(&reencode(&response, version), version);
            assert_eq!(again.as_ref(), Ok(&response));
        }
    }
}

fn reencode<M: Encodable + std::fmt::Debug>(message: &M, version: i16) -> Bytes {
    let mut out = Vec::new();
    message
        .encode(&mut out, version)
        .unwrap_or_else(|error| panic!("accepted {message:?} does not re-encode: {error}"));
    Bytes::from(out)
}
