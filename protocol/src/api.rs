//! The APIs Skiff speaks: one table of supported versions (what the broker advertises in
//! ApiVersions and what request decoding accepts), the first flexible (tagged-field) version of
//! each API, and from it which request and response header version each (api, version) uses.
//!
//! Must never: hold a second copy of the version table, or let decoding accept a version that
//! ApiVersions does not advertise.

pub use kafka_protocol::messages::ApiKey;

/// One row of the supported-versions table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    /// The API.
    pub api_key: ApiKey,
    /// Oldest version decoded and advertised.
    pub version_min: i16,
    /// Newest version decoded and advertised.
    pub version_max: i16,
    /// First version using the flexible encoding (compact strings, tagged fields, request header
    /// v2, response header v1); `None` if no supported version is flexible.
    pub flexible_version_min: Option<i16>,
}

const fn row(api_key: ApiKey, version_min: i16, version_max: i16, flexible: i16) -> SupportedApi {
    SupportedApi {
        api_key,
        version_min,
        version_max,
        flexible_version_min: if flexible < 0 { None } else { Some(flexible) },
    }
}

/// Every API and version Skiff decodes, in api-key order (the config admin APIs at the end, on
/// their own lines). Fetch and Produce start at 0 so that
/// legacy clients (0.9/0.10) pass negotiation; ApiVersions stops at 3 (v4 adds nothing Skiff uses).
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    row(ApiKey::Produce, 0, 9, 9),
    row(ApiKey::Fetch, 0, 13, 12),
    row(ApiKey::ListOffsets, 0, 7, 6),
    row(ApiKey::Metadata, 0, 12, 9),
    row(ApiKey::OffsetCommit, 0, 8, 8),
    row(ApiKey::OffsetFetch, 0, 8, 6),
    row(ApiKey::FindCoordinator, 0, 4, 3),
    row(ApiKey::JoinGroup, 0, 9, 6),
    row(ApiKey::Heartbeat, 0, 4, 4),
    row(ApiKey::LeaveGroup, 0, 5, 4),
    row(ApiKey::SyncGroup, 0, 5, 4),
    row(ApiKey::DescribeGroups, 0, 5, 5),
    row(ApiKey::ListGroups, 0, 5, 3),
    row(ApiKey::SaslHandshake, 0, 1, -1),
    row(ApiKey::ApiVersions, 0, 3, 3),
    row(ApiKey::CreateTopics, 0, 7, 5),
    row(ApiKey::DeleteTopics, 0, 6, 4),
    row(ApiKey::DeleteRecords, 0, 2, 2),
    row(ApiKey::InitProducerId, 0, 4, 2),
    row(ApiKey::OffsetForLeaderEpoch, 0, 4, 4),
    row(ApiKey::DescribeConfigs, 0, 4, 4),
    row(ApiKey::DescribeLogDirs, 0, 4, 2),
    row(ApiKey::SaslAuthenticate, 0, 2, 2),
    // Config and partition admin APIs: every version Kafka 3.9 accepts.
    row(ApiKey::AlterConfigs, 0, 2, 2),
    row(ApiKey::CreatePartitions, 0, 3, 2),
    row(ApiKey::IncrementalAlterConfigs, 0, 1, 1),
    row(ApiKey::DeleteGroups, 0, 2, 2),
    row(ApiKey::ListPartitionReassignments, 0, 0, 0),
    row(ApiKey::OffsetDelete, 0, 0, -1),
    // Cluster admin APIs: every version Kafka 3.9 accepts.
    row(ApiKey::ElectLeaders, 0, 2, 2),
    // v1 (Kafka 4.1, KIP-860's allow_replication_factor_change) is not decoded: clients that do
    // not refuse replication factor changes send v0.
    row(ApiKey::AlterPartitionReassignments, 0, 0, 0),
    // Security admin APIs (issue 39): the ACL APIs at the versions Kafka 4.x serves, the SCRAM
    // APIs' one version, DescribeCluster up to kafka-protocol's v1.
    row(ApiKey::DescribeAcls, 2, 3, 2),
    row(ApiKey::CreateAcls, 2, 3, 2),
    row(ApiKey::DeleteAcls, 2, 3, 2),
    row(ApiKey::DescribeUserScramCredentials, 0, 0, 0),
    row(ApiKey::AlterUserScramCredentials, 0, 0, 0),
    row(ApiKey::DescribeCluster, 0, 1, 0),
    // Client quota admin APIs: every version Kafka 4.1 accepts.
    row(ApiKey::DescribeClientQuotas, 0, 1, 1),
    row(ApiKey::AlterClientQuotas, 0, 1, 1),
];

/// The table row of `api_key`, if Skiff supports it at all.
pub fn supported(api_key: ApiKey) -> Option<&'static SupportedApi> {
    SUPPORTED_APIS.iter().find(|row| row.api_key == api_key)
}

impl SupportedApi {
    /// Whether `version` is within this API's supported range.
    pub fn supports(&self, version: i16) -> bool {
        (self.version_min..=self.version_max).contains(&version)
    }

    /// Whether `version` uses the flexible encoding.
    pub fn is_flexible(&self, version: i16) -> bool {
        self.flexible_version_min
            .is_some_and(|flexible| version >= flexible)
    }

    /// Request header version: 2 for flexible versions, else 1 (ControlledShutdown v0's header
    /// v0 is the only exception in Kafka, and Skiff does not serve it).
    pub fn request_header_version(&self, version: i16) -> i16 {
        if self.is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// Response header version: 1 for flexible versions, else 0 — except ApiVersions, whose
    /// response header is always v0 so that a client that does not yet know the broker's versions
    /// can read it (KIP-511).
    pub fn response_header_version(&self, version: i16) -> i16 {
        if self.api_key != ApiKey::ApiVersions && self.is_flexible(version) {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_versions_agree_with_kafka_protocol() {
        for row in SUPPORTED_APIS {
            for version in row.version_min..=row.version_max {
                assert_eq!(
                    row.request_header_version(version),
                    row.api_key.request_header_version(version),
                    "{:?} v{version}",
                    row.api_key
                );
                assert_eq!(
                    row.response_header_version(version),
                    row.api_key.response_header_version(version),
                    "{:?} v{version}",
                    row.api_key
                );
            }
        }
    }

    #[test]
    fn table_is_within_kafka_protocol_ranges_and_unique() {
        for (index, row) in SUPPORTED_APIS.iter().enumerate() {
            let range = row.api_key.valid_versions();
            assert!(row.version_min >= range.min && row.version_max <= range.max);
            assert!(SUPPORTED_APIS
                .iter()
                .skip(index + 1)
                .all(|other| other.api_key != row.api_key));
        }
    }

    #[test]
    fn legacy_clients_can_negotiate() {
        for key in [
            ApiKey::Fetch,
            ApiKey::Produce,
            ApiKey::Metadata,
            ApiKey::ApiVersions,
        ] {
            assert_eq!(supported(key).map(|row| row.version_min), Some(0));
        }
    }
}
