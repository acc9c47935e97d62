//! Old Apache Kafka releases whose ApiVersions answer Skiff can imitate
//! (`skiff.advertised.kafka.version`), so that unmodified modern clients negotiate the legacy
//! protocol with it: each release's whole ApiVersions table, as that release's broker advertised it.
//!
//! The tables are the `ApiKeys` enum of each release (the api key and the newest version of its
//! schema list; every version starts at 0), inter-broker APIs included: the broker takes out those it
//! never advertises to clients, and those Skiff does not handle.
//!
//! Must never: hold Skiff's own supported versions (that is [`crate::api`]), or decide what a
//! broker advertises beyond the release's own table.

use std::fmt;
use std::str::FromStr;

use kafka_protocol::messages::ApiKey;

/// A Kafka release that `skiff.advertised.kafka.version` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KafkaRelease {
    /// 0.10.0: the first release with ApiVersions (KIP-35) and message format v1.
    V0_10_0,
    /// 0.10.1: Fetch v3 (KIP-74), ListOffsets v1 (KIP-79), JoinGroup v1 (KIP-62), CreateTopics.
    V0_10_1,
    /// 0.10.2: OffsetFetch v2 (KIP-88), CreateTopics v1 (validate only).
    V0_10_2,
    /// 0.11.0: message format v2, idempotence and transactions, ACL and config APIs.
    V0_11_0,
}

/// The release name a config value does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown Kafka release '{given}': expected one of {}",
    KafkaRelease::names()
)]
pub struct UnknownRelease {
    /// What was given.
    pub given: String,
}

use ApiKey::*;

/// 0.10.0's `ApiKeys`: (api, newest version).
const TABLE_0_10_0: &[(ApiKey, i16)] = &[
    (Produce, 2),
    (Fetch, 2),
    (ListOffsets, 0),
    (Metadata, 1),
    (LeaderAndIsr, 0),
    (StopReplica, 0),
    (UpdateMetadata, 2),
    (ControlledShutdown, 1),
    (OffsetCommit, 2),
    (OffsetFetch, 1),
    (FindCoordinator, 0),
    (JoinGroup, 0),
    (Heartbeat, 0),
    (LeaveGroup, 0),
    (SyncGroup, 0),
    (DescribeGroups, 0),
    (ListGroups, 0),
    (SaslHandshake, 0),
    (ApiVersions, 0),
];

/// 0.10.1's `ApiKeys`.
const TABLE_0_10_1: &[(ApiKey, i16)] = &[
    (Produce, 2),
    (Fetch, 3),
    (ListOffsets, 1),
    (Metadata, 2),
    (LeaderAndIsr, 0),
    (StopReplica, 0),
    (UpdateMetadata, 2),
    (ControlledShutdown, 1),
    (OffsetCommit, 2),
    (OffsetFetch, 1),
    (FindCoordinator, 0),
    (JoinGroup, 1),
    (Heartbeat, 0),
    (LeaveGroup, 0),
    (SyncGroup, 0),
    (DescribeGroups, 0),
    (ListGroups, 0),
    (SaslHandshake, 0),
    (ApiVersions, 0),
    (CreateTopics, 0),
    (DeleteTopics, 0),
];

/// 0.10.2's `ApiKeys`.
const TABLE_0_10_2: &[(ApiKey, i16)] = &[
    (Produce, 2),
    (Fetch, 3),
    (ListOffsets, 1),
    (Metadata, 2),
    (LeaderAndIsr, 0),
    (StopReplica, 0),
    (UpdateMetadata, 3),
    (ControlledShutdown, 1),
    (OffsetCommit, 2),
    (OffsetFetch, 2),
    (FindCoordinator, 0),
    (JoinGroup, 1),
    (Heartbeat, 0),
    (LeaveGroup, 0),
    (SyncGroup, 0),
    (DescribeGroups, 0),
    (ListGroups, 0),
    (SaslHandshake, 0),
    (ApiVersions, 0),
    (CreateTopics, 1),
    (DeleteTopics, 0),
];

/// 0.11.0's `ApiKeys`.
const TABLE_0_11_0: &[(ApiKey, i16)] = &[
    (Produce, 3),
    (Fetch, 5),
    (ListOffsets, 2),
    (Metadata, 4),
    (LeaderAndIsr, 0),
    (StopReplica, 0),
    (UpdateMetadata, 3),
    (ControlledShutdown, 1),
    (OffsetCommit, 3),
    (OffsetFetch, 3),
    (FindCoordinator, 1),
    (JoinGroup, 2),
    (Heartbeat, 1),
    (LeaveGroup, 1),
    (SyncGroup, 1),
    (DescribeGroups, 1),
    (ListGroups, 1),
    (SaslHandshake, 0),
    (ApiVersions, 1),
    (CreateTopics, 2),
    (DeleteTopics, 1),
    (DeleteRecords, 0),
    (InitProducerId, 0),
    (OffsetForLeaderEpoch, 0),
    (AddPartitionsToTxn, 0),
    (AddOffsetsToTxn, 0),
    (EndTxn, 0),
    (WriteTxnMarkers, 0),
    (TxnOffsetCommit, 0),
    (DescribeAcls, 0),
    (CreateAcls, 0),
    (DeleteAcls, 0),
    (DescribeConfigs, 0),
    (AlterConfigs, 0),
];

impl KafkaRelease {
    /// Every release, oldest first.
    pub const ALL: [KafkaRelease; 4] = [
        KafkaRelease::V0_10_0,
        KafkaRelease::V0_10_1,
        KafkaRelease::V0_10_2,
        KafkaRelease::V0_11_0,
    ];

    /// The name a config file uses: `0.10.2`.
    pub fn name(self) -> &'static str {
        match self {
            KafkaRelease::V0_10_0 => "0.10.0",
            KafkaRelease::V0_10_1 => "0.10.1",
            KafkaRelease::V0_10_2 => "0.10.2",
            KafkaRelease::V0_11_0 => "0.11.0",
        }
    }

    /// Every name, comma-separated, for error messages.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// The release's whole table: (api, newest version), inter-broker APIs included.
    pub fn api_table(self) -> &'static [(ApiKey, i16)] {
        match self {
            KafkaRelease::V0_10_0 => TABLE_0_10_0,
            KafkaRelease::V0_10_1 => TABLE_0_10_1,
            KafkaRelease::V0_10_2 => TABLE_0_10_2,
            KafkaRelease::V0_11_0 => TABLE_0_11_0,
        }
    }

    /// The newest version of `api_key` this release had, or `None` if the API did not exist in it.
    pub fn version_max(self, api_key: ApiKey) -> Option<i16> {
        self.api_table()
            .iter()
            .find(|(key, _)| *key == api_key)
            .map(|(_, max)| *max)
    }
}

/// Whether `api_key` is one brokers send each other (controller, replication, transaction
/// markers), never advertised to clients by an imitated release.
pub fn is_inter_broker(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        LeaderAndIsr | StopReplica | UpdateMetadata | ControlledShutdown | WriteTxnMarkers
    )
}

impl fmt::Display for KafkaRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KafkaRelease {
    type Err = UnknownRelease;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|release| release.name() == text)
            .ok_or_else(|| UnknownRelease {
                given: text.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for release in KafkaRelease::ALL {
            assert_eq!(release.name().parse::<KafkaRelease>(), Ok(release));
        }
        let error = "0.9.0".parse::<KafkaRelease>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown Kafka release '0.9.0': expected one of 0.10.0, 0.10.1, 0.10.2, 0.11.0"
        );
    }

    #[test]
    fn consumer_group_apis_exist_in_every_release() {
        // Kafka has had the group APIs since 0.9: a cap must never hide them.
        for release in KafkaRelease::ALL {
            for api in [
                OffsetCommit,
                OffsetFetch,
                FindCoordinator,
                JoinGroup,
                Heartbeat,
                LeaveGroup,
                SyncGroup,
                DescribeGroups,
                ListGroups,
            ] {
                assert!(
                    release.version_max(api).is_some(),
                    "{release} lacks {api:?}"
                );
            }
        }
    }

    #[test]
    fn each_release_only_adds_apis_and_never_lowers_a_version() {
        for pair in KafkaRelease::ALL.windows(2) {
            let [older, newer] = [pair[0], pair[1]];
            for (api, max) in older.api_table() {
                let newer_max = newer.version_max(*api).expect("an API never disappears");
                assert!(
                    newer_max >= *max,
                    "{api:?} went down from {older} to {newer}"
                );
            }
        }
    }

    #[test]
    fn tables_have_no_duplicate_api() {
        for release in KafkaRelease::ALL {
            let table = release.api_table();
            for (index, (api, _)) in table.iter().enumerate() {
                assert!(
                    table[index + 1..].iter().all(|(other, _)| other != api),
                    "{release} lists {api:?} twice"
                );
            }
        }
    }
}
