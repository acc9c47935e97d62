//! ApiVersions: advertises exactly the APIs this broker handles, at the versions the protocol crate
//! decodes — optionally capped to an old Kafka release (`skiff.advertised.kafka.version`) so that
//! unmodified modern clients speak the legacy protocol to it (they negotiate down to Fetch v2/v3).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use skiff_protocol::api;
use skiff_protocol::release::{self, KafkaRelease};

use super::{error_code, HANDLED_APIS};
use crate::context::Ctx;

/// The advertised (api key, min, max) list: every API Skiff handles at the versions it decodes, or,
/// under a release cap, every API that release advertised to clients and Skiff handles, at
/// min(release, Skiff) max version. An API whose capped max falls below Skiff's oldest version is
/// left out (no version of it could be spoken).
pub(crate) fn advertised(release: Option<KafkaRelease>) -> Vec<ApiVersion> {
    HANDLED_APIS
        .iter()
        .filter_map(|api_key| {
            let row = api::supported(*api_key)?;
            let version_max = match release {
                None => row.version_max,
                Some(_) if release::is_inter_broker(*api_key) => return None,
                Some(release) => release.version_max(*api_key)?.min(row.version_max),
            };
            if version_max < row.version_min {
                return None;
            }
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
        .with_api_keys(advertised(ctx.config.advertised_kafka_version))
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
    use kafka_protocol::messages::ApiKey;

    use super::*;

    fn versions(release: Option<KafkaRelease>) -> Vec<(ApiKey, i16, i16)> {
        advertised(release)
            .iter()
            .map(|entry| {
                let key = ApiKey::try_from(entry.api_key).expect("a known key");
                (key, entry.min_version, entry.max_version)
            })
            .collect()
    }

    /// The exact set per cap: what the release's broker advertised to clients (its `ApiKeys`
    /// without the inter-broker APIs), intersected with what Skiff handles, at the lower max.
    #[test]
    fn each_release_cap_advertises_exactly_its_client_apis() {
        use ApiKey::*;
        let group_apis_0_10 = [
            (OffsetCommit, 0, 2),
            (FindCoordinator, 0, 0),
            (JoinGroup, 0, 0),
            (Heartbeat, 0, 0),
            (LeaveGroup, 0, 0),
            (SyncGroup, 0, 0),
            (DescribeGroups, 0, 0),
            (ListGroups, 0, 0),
        ];
        let mut expected_0_10_0 = vec![
            (Produce, 0, 2),
            (Fetch, 0, 2),
            (ListOffsets, 0, 0),
            (Metadata, 0, 1),
            (ApiVersions, 0, 0),
            (OffsetFetch, 0, 1),
            (SaslHandshake, 0, 0),
        ];
        expected_0_10_0.extend(group_apis_0_10);
        let mut expected_0_10_2 = vec![
            (Produce, 0, 2),
            (Fetch, 0, 3),
            (ListOffsets, 0, 1),
            (Metadata, 0, 2),
            (ApiVersions, 0, 0),
            (CreateTopics, 0, 1),
            (DeleteTopics, 0, 0),
            (OffsetFetch, 0, 2),
            (SaslHandshake, 0, 0),
        ];
        expected_0_10_2.extend(group_apis_0_10);
        expected_0_10_2.retain(|(api, _, _)| *api != JoinGroup);
        expected_0_10_2.push((JoinGroup, 0, 1));
        let mut expected_0_10_1 = expected_0_10_2.clone();
        for entry in &mut expected_0_10_1 {
            match entry.0 {
                CreateTopics => entry.2 = 0,
                OffsetFetch => entry.2 = 1,
                _ => {}
            }
        }
        let expected_0_11_0 = vec![
            (Produce, 0, 3),
            (Fetch, 0, 5),
            (ListOffsets, 0, 2),
            (Metadata, 0, 4),
            (ApiVersions, 0, 1),
            (CreateTopics, 0, 2),
            (DeleteTopics, 0, 1),
            // KIP-107 shipped DeleteRecords v0 in 0.11.0 (its ApiKeys has DELETE_RECORDS).
            (DeleteRecords, 0, 0),
            (DescribeConfigs, 0, 0),
            (AlterConfigs, 0, 0),
            (FindCoordinator, 0, 1),
            (JoinGroup, 0, 2),
            (SyncGroup, 0, 1),
            (Heartbeat, 0, 1),
            (LeaveGroup, 0, 1),
            (OffsetCommit, 0, 3),
            (OffsetFetch, 0, 3),
            (DescribeGroups, 0, 1),
            (ListGroups, 0, 1),
            (InitProducerId, 0, 0),
            // KIP-101 shipped OffsetsForLeaderEpoch v0 in 0.11.0.
            (OffsetForLeaderEpoch, 0, 0),
            (SaslHandshake, 0, 0),
            // KIP-98 shipped TxnOffsetCommit v0 in 0.11.0.
            (TxnOffsetCommit, 0, 0),
        ];
        for (release, mut expected) in [
            (KafkaRelease::V0_10_0, expected_0_10_0),
            (KafkaRelease::V0_10_1, expected_0_10_1),
            (KafkaRelease::V0_10_2, expected_0_10_2),
            (KafkaRelease::V0_11_0, expected_0_11_0),
        ] {
            let mut got = versions(Some(release));
            got.sort_by_key(|(api, _, _)| *api as i16);
            expected.sort_by_key(|(api, _, _)| *api as i16);
            assert_eq!(got, expected, "under the {release} cap");
        }
    }

    #[test]
    fn without_a_cap_every_handled_api_is_advertised_at_skiffs_versions() {
        let got = versions(None);
        assert_eq!(got.len(), HANDLED_APIS.len());
        for (api_key, min, max) in got {
            let row = api::supported(api_key).expect("a decoder");
            assert_eq!(
                (min, max),
                (row.version_min, row.version_max),
                "{api_key:?}"
            );
        }
    }
}
