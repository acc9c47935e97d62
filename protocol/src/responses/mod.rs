//! Response encoding: any kafka-protocol response struct with its header and size prefix into one
//! buffer ([`encode_response`]; versions past the crate's range as the crate's version with the
//! same bytes, [`crate::api::PAST_CRATE`]), the EndTxn response whose v5 the crate lacks
//! ([`end_txn`]), the KIP-848 consumer group responses the crate has only at v0
//! ([`consumer_group`]), the ApiVersions answers built from the one version table, and the Fetch response
//! as a layout plan with holes for record sets ([`fetch`]), and that response read back by a
//! follower with bounded code ([`fetch_reader`]); the transaction responses a broker reads from a
//! peer, with bounded code ([`txn_peer`]).
//!
//! Must never: write a default-valued tagged field (Debian's kcat, librdkafka 2.0.2, cannot parse
//! them in ApiVersions v3 — see the exact-bytes test), or pick a header version other than the one
//! [`crate::api::SupportedApi::response_header_version`] gives.

pub mod consumer_group;
pub mod describe_cluster;
pub mod end_txn;
pub mod fetch;
pub mod fetch_reader;
pub mod txn_peer;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::api::{self, SUPPORTED_APIS};
use crate::error::EncodeError;
use crate::header::{put_response_header, response_header_bytes};
use crate::limits::FRAME_PREFIX_BYTES;

/// Kafka's UNSUPPORTED_VERSION error code.
pub const UNSUPPORTED_VERSION_ERROR_CODE: i16 = 35;

/// Encodes `message` as the response to `api_key` at `version`: size prefix, response header of
/// the right version, body.
pub fn encode_response<M: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    message: &M,
) -> Result<BytesMut, EncodeError> {
    let header_version = api::decodable(api_key)
        .map(|row| row.response_header_version(version))
        .unwrap_or(0);
    // kafka-protocol reports errors as `anyhow` values; they are kept as text so that this crate
    // does not depend on anyhow.
    let message_error = |reason: String| EncodeError::Message {
        api_key: api_key as i16,
        api_version: version,
        reason,
    };
    // Past kafka-protocol's range the crate encodes the older version with the same bytes.
    let crate_version = api::response_crate_version(api_key, version);
    let body_bytes = message
        .compute_size(crate_version)
        .map_err(|error| message_error(error.to_string()))?;
    let too_large = EncodeError::TooLarge {
        what: "response size",
        value: u64::try_from(body_bytes).unwrap_or(u64::MAX),
    };
    let size = response_header_bytes(header_version)
        .checked_add(body_bytes)
        .ok_or(too_large)?;
    let size_field = i32::try_from(size).map_err(|_| EncodeError::TooLarge {
        what: "response size",
        value: u64::try_from(size).unwrap_or(u64::MAX),
    })?;
    let mut out = BytesMut::with_capacity(FRAME_PREFIX_BYTES.saturating_add(size));
    out.put_i32(size_field);
    put_response_header(&mut out, header_version, correlation_id);
    message
        .encode(&mut out, crate_version)
        .map_err(|error| message_error(error.to_string()))?;
    Ok(out)
}

/// The supported-versions list of an ApiVersions response, from [`SUPPORTED_APIS`].
pub fn supported_api_versions() -> Vec<ApiVersion> {
    capped_api_versions(|_| None)
}

/// The supported-versions list with each API's maximum lowered to `version_max_cap(api_key)`
/// (`None` keeps the table's maximum). A broker "emulating 0.10.2" advertises Fetch ≤ 3 and
/// Produce ≤ 2 this way, which makes unmodified modern clients fall back to magic 1
/// (docs/design/clients.md §1). An API whose cap is below its minimum is left out.
pub fn capped_api_versions(version_max_cap: impl Fn(ApiKey) -> Option<i16>) -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .filter_map(|row| {
            let version_max = version_max_cap(row.api_key)
                .map_or(row.version_max, |cap| cap.min(row.version_max));
            (version_max >= row.version_min).then(|| {
                ApiVersion::default()
                    .with_api_key(row.api_key as i16)
                    .with_min_version(row.version_min)
                    .with_max_version(version_max)
            })
        })
        .collect()
}

/// The ApiVersions response body Skiff sends for a supported request version.
pub fn api_versions_response(throttle_time_ms: i32) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(supported_api_versions())
        .with_throttle_time_ms(throttle_time_ms)
}

/// Kafka's feature name for the transaction protocol version (KIP-890's transaction version 2 is
/// level 2).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// First ApiVersions version whose clients accept a supported feature whose minimum is 0: older
/// Java clients refused such a range (KAFKA-17011), so Kafka leaves those features out below v4.
pub const SUPPORTED_FEATURE_MIN_ZERO_VERSION: i16 = 4;

/// First ApiVersions version with the feature fields (tagged, so a client that does not know them
/// skips them).
pub const FEATURES_VERSION_MIN: i16 = 3;

/// The `transaction.version` levels: 0 no transactions, 1 the classic protocol, 2 KIP-890's
/// (Produce v12 adds the partition, EndTxn v5 bumps the epoch at every transaction end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i16)]
pub enum TransactionVersion {
    /// Level 0: not finalized (Kafka leaves a level-0 feature out of the finalized list).
    V0 = 0,
    /// Level 1: transactions with the classic protocol.
    V1 = 1,
    /// Level 2: KIP-890's protocol; Kafka 4.x clients use it when they see this level finalized.
    V2 = 2,
}

impl TransactionVersion {
    /// The lowest level this broker supports.
    pub const SUPPORTED_MIN: Self = Self::V0;
    /// The highest level this broker supports.
    pub const SUPPORTED_MAX: Self = Self::V2;

    /// The highest level the advertised table ([`SUPPORTED_APIS`]) can serve. Finalizing a
    /// higher one would break clients: a Kafka 4.x client that sees level 2 stops adding
    /// partitions itself and sends Produce, EndTxn and TxnOffsetCommit at the highest versions the
    /// broker advertises, so those must be v12, v5 and v5 (and AddPartitionsToTxn v5 served, for
    /// the leaders' implicit adds) before level 2 is finalized.
    pub fn servable_max() -> Self {
        Self::servable_max_of(SUPPORTED_APIS)
    }

    /// [`Self::servable_max`] of any table (for tests of the switch-on order).
    pub fn servable_max_of(table: &[api::SupportedApi]) -> Self {
        let serves = |api_key: ApiKey, version: i16| {
            table
                .iter()
                .any(|row| row.api_key == api_key && row.supports(version))
        };
        let classic = [
            (ApiKey::InitProducerId, 0),
            (ApiKey::AddPartitionsToTxn, 0),
            (ApiKey::AddOffsetsToTxn, 0),
            (ApiKey::EndTxn, 0),
            (ApiKey::WriteTxnMarkers, 1),
            (ApiKey::TxnOffsetCommit, 0),
        ];
        let kip_890 = [
            (ApiKey::Produce, 12),
            (ApiKey::EndTxn, 5),
            (ApiKey::TxnOffsetCommit, 5),
            (ApiKey::AddPartitionsToTxn, 5),
        ];
        if !classic.iter().all(|(key, version)| serves(*key, *version)) {
            Self::V0
        } else if kip_890.iter().all(|(key, version)| serves(*key, *version)) {
            Self::V2
        } else {
            Self::V1
        }
    }
}

/// The cluster's finalized features as an ApiVersions response states them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalizedFeatures {
    /// Grows whenever a finalized level changes; a client takes the levels of the highest epoch it
    /// has seen, so a change must come with a higher epoch. At least 0 (-1 means unknown).
    pub epoch: i64,
    /// The finalized `transaction.version`.
    pub transaction_version: TransactionVersion,
}

/// Adds the feature fields to an ApiVersions response for a request of `request_version`, as
/// Kafka 4.1.1 fills them: the supported `transaction.version` range (left out below
/// [`SUPPORTED_FEATURE_MIN_ZERO_VERSION`], since its minimum is 0), the finalized features' epoch,
/// and the finalized level with min = max = level (left out at level 0). Versions before
/// [`FEATURES_VERSION_MIN`] have no such fields and are returned unchanged. A Kafka 4.x client
/// uses transaction version 2 when the highest-epoch response it has seen finalizes level 2.
/// The caller finalizes no higher than [`TransactionVersion::servable_max`].
pub fn with_features(
    response: ApiVersionsResponse,
    request_version: i16,
    finalized: FinalizedFeatures,
) -> ApiVersionsResponse {
    debug_assert!(
        finalized.epoch >= 0,
        "a finalized-features epoch is at least 0"
    );
    if request_version < FEATURES_VERSION_MIN {
        return response;
    }
    let name = || StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE);
    let supported_min = TransactionVersion::SUPPORTED_MIN as i16;
    let supported = (supported_min > 0 || request_version >= SUPPORTED_FEATURE_MIN_ZERO_VERSION)
        .then(|| {
            SupportedFeatureKey::default()
                .with_name(name())
                .with_min_version(supported_min)
                .with_max_version(TransactionVersion::SUPPORTED_MAX as i16)
        });
    let level = finalized.transaction_version as i16;
    let finalized_key = (level > 0).then(|| {
        FinalizedFeatureKey::default()
            .with_name(name())
            .with_min_version_level(level)
            .with_max_version_level(level)
    });
    response
        .with_supported_features(supported.into_iter().collect())
        .with_finalized_features_epoch(finalized.epoch)
        .with_finalized_features(finalized_key.into_iter().collect())
}

/// Kafka's answer to an ApiVersions request of a version it does not support: UNSUPPORTED_VERSION
/// (35) with the full version list, in a v0 response (header v0), so that the client can retry
/// with a version it finds there (KIP-511).
pub fn encode_api_versions_unsupported(correlation_id: i32) -> Result<BytesMut, EncodeError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(UNSUPPORTED_VERSION_ERROR_CODE)
        .with_api_keys(supported_api_versions());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
}

#[cfg(test)]
mod tests;
