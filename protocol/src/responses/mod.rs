//! Response encoding: any kafka-protocol response struct with its header and size prefix into one
//! buffer ([`encode_response`]), the ApiVersions answers built from the one version table, and the
//! Fetch response as a layout plan with holes for record sets ([`fetch`]), and that response read
//! back by a follower with bounded code ([`fetch_reader`]).
//!
//! Must never: write a default-valued tagged field (Debian's kcat, librdkafka 2.0.2, cannot parse
//! them in ApiVersions v3 — see the exact-bytes test), or pick a header version other than the one
//! [`crate::api::SupportedApi::response_header_version`] gives.

pub mod fetch;
pub mod fetch_reader;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::Encodable;

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
    let header_version = api::supported(api_key)
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
