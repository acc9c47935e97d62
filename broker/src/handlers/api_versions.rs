//! ApiVersions: advertises exactly the APIs this broker handles, at the versions the protocol crate
//! decodes — optionally capped to an old Kafka release (`skiff.advertised.kafka.version`) so that
//! unmodified modern clients speak the legacy protocol to it (they negotiate down to Fetch v2/v3).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use skiff_protocol::api;

use super::{error_code, HANDLED_APIS};
use crate::context::Ctx;

/// Highest version of each API in an old Kafka release; APIs missing from a release's list did not
/// exist in it and are not advertised under that cap.
fn release_cap(release: &str, api_key: ApiKey) -> Option<Option<i16>> {
    use ApiKey::*;
    let caps: &[(ApiKey, i16)] = match release {
        "0.10.0" => &[
            (Produce, 2),
            (Fetch, 2),
            (ListOffsets, 0),
            (Metadata, 1),
            (ApiVersions, 0),
            (SaslHandshake, 0),
        ],
        "0.10.1" => &[
            (Produce, 2),
            (Fetch, 3),
            (ListOffsets, 1),
            (Metadata, 2),
            (ApiVersions, 0),
            (SaslHandshake, 0),
            (CreateTopics, 0),
            (DeleteTopics, 0),
        ],
        "0.10.2" => &[
            (Produce, 2),
            (Fetch, 3),
            (ListOffsets, 1),
            (Metadata, 2),
            (ApiVersions, 0),
            (SaslHandshake, 0),
            (CreateTopics, 1),
            (DeleteTopics, 0),
        ],
        "0.11.0" => &[
            (Produce, 3),
            (Fetch, 5),
            (ListOffsets, 2),
            (Metadata, 4),
            (ApiVersions, 1),
            (SaslHandshake, 0),
            (CreateTopics, 2),
            (DeleteTopics, 1),
            (DescribeConfigs, 0),
        ],
        _ => return None,
    };
    Some(
        caps.iter()
            .find(|(key, _)| *key == api_key)
            .map(|(_, max)| *max),
    )
}

/// Releases `skiff.advertised.kafka.version` accepts.
pub(crate) const CAPPABLE_RELEASES: &[&str] = &["0.10.0", "0.10.1", "0.10.2", "0.11.0"];

/// The advertised (api key, min, max) list.
pub(crate) fn advertised(release: Option<&str>) -> Vec<ApiVersion> {
    HANDLED_APIS
        .iter()
        .filter_map(|api_key| {
            let row = api::supported(*api_key)?;
            let version_max = match release.and_then(|release| release_cap(release, *api_key)) {
                None => row.version_max,
                Some(None) => return None,
                Some(Some(cap)) => cap.min(row.version_max),
            };
            Some(
                ApiVersion::default()
                    .with_api_key(*api_key as i16)
                    .with_min_version(row.version_min)
                    .with_max_version(version_max),
            )
        })
        .collect()
}

pub(crate) fn handle(
    ctx: &Ctx,
    _header: &RequestHeader,
    _request: ApiVersionsRequest,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_api_keys(advertised(ctx.config.advertised_kafka_version.as_deref()))
}

/// The KIP-511 answer to an ApiVersions request newer than we know: v0 layout, error 35, and our
/// full list so the client can retry at a version we support.
pub(crate) fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code::UNSUPPORTED_VERSION)
        .with_api_keys(advertised(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_cap_lowers_fetch_and_hides_newer_apis() {
        let list = advertised(Some("0.10.0"));
        let fetch = list
            .iter()
            .find(|entry| entry.api_key == ApiKey::Fetch as i16)
            .expect("fetch");
        assert_eq!((fetch.min_version, fetch.max_version), (0, 2));
        assert!(list
            .iter()
            .all(|entry| entry.api_key != ApiKey::CreateTopics as i16));
        for release in CAPPABLE_RELEASES {
            assert!(!advertised(Some(release)).is_empty());
        }
    }
}
