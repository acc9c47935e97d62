//! The APIs Skiff speaks: one table of supported versions (what the broker advertises in
//! ApiVersions and what request decoding accepts), the first flexible (tagged-field) version of
//! each API, and from it which request and response header version each (api, version) uses; the
//! staged rows of APIs whose decoders exist but whose handlers have not landed
//! ([`PENDING_APIS`]); and which versions past kafka-protocol 0.15.1's range share their bytes
//! with a version the crate encodes ([`PAST_CRATE`]).
//!
//! Must never: hold a second copy of the version table, or let decoding accept a version that
//! ApiVersions does not advertise (a pending row is decoded only by the test and fuzz entry
//! points, never by [`crate::requests::decode_request`]).

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
    // v10 and v11 add nothing to the request; v12 marks a transaction-version-2 producer (the
    // leader adds the partition to the transaction itself, KIP-890). v13 (topic ids) is not
    // decoded.
    row(ApiKey::Produce, 0, 12, 9),
    row(ApiKey::Fetch, 0, 13, 12),
    row(ApiKey::ListOffsets, 0, 7, 6),
    row(ApiKey::Metadata, 0, 12, 9),
    // v9 carries a consumer group member's id and epoch (KIP-848). Kafka 4.1.1 serves up to v10
    // (topic ids instead of names), past kafka-protocol 0.15.1 and not decoded.
    row(ApiKey::OffsetCommit, 0, 9, 8),
    row(ApiKey::OffsetFetch, 0, 9, 6),
    // v5 only allows TRANSACTION_ABORTABLE in answers, v6 the share-group key type (refused: no
    // share groups); both read as v4.
    row(ApiKey::FindCoordinator, 0, 6, 3),
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
    // v5 only allows TRANSACTION_ABORTABLE in the answer. v6 (2PC) is unstable in Kafka 4.1.1.
    row(ApiKey::InitProducerId, 0, 5, 2),
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
    // Security admin APIs (issue 39): the ACL APIs at the versions Kafka 4.1.1 serves (KIP-896
    // removed v0; v1 is v2 before the flexible encoding), the SCRAM APIs' one version,
    // DescribeCluster 0-2 (v2, KIP-1073: Skiff's own request and response types).
    row(ApiKey::DescribeAcls, 1, 3, 2),
    row(ApiKey::CreateAcls, 1, 3, 2),
    row(ApiKey::DeleteAcls, 1, 3, 2),
    row(ApiKey::DescribeUserScramCredentials, 0, 0, 0),
    row(ApiKey::AlterUserScramCredentials, 0, 0, 0),
    row(ApiKey::DescribeCluster, 0, 2, 0),
    // Client quota admin APIs: every version Kafka 4.1 accepts.
    row(ApiKey::DescribeClientQuotas, 0, 1, 1),
    row(ApiKey::AlterClientQuotas, 0, 1, 1),
    // Transactions (issue 38). WriteTxnMarkers: Kafka 4.0 removed v0; Kafka 4.1.1 refuses it as
    // an unsupported version, and so does Skiff. TxnOffsetCommit v5 marks a transaction
    // version 2 client (KIP-890).
    row(ApiKey::WriteTxnMarkers, 1, 1, 1),
    row(ApiKey::TxnOffsetCommit, 0, 5, 3),
    // DescribeProducers (KIP-664): its one version.
    row(ApiKey::DescribeProducers, 0, 0, 0),
    // Transactions (issue 38), the coordinator's APIs. v0-v3 the client's form; v4-v5 the
    // broker's batched form (verify-only, KIP-890).
    row(ApiKey::AddPartitionsToTxn, 0, 5, 3),
    row(ApiKey::AddOffsetsToTxn, 0, 4, 3),
    // v5: transaction version 2 (its response adds the producer id and epoch; encoded by
    // `crate::responses::end_txn`).
    row(ApiKey::EndTxn, 0, 5, 3),
    row(ApiKey::DescribeTransactions, 0, 0, 0),
    // v2 adds the transactional-id pattern (KIP-1152).
    row(ApiKey::ListTransactions, 0, 2, 0),
    // KIP-848 consumer groups (issue 40): Kafka 4.1.1's stable versions (`ApiKeys` 68 and 69).
    row(ApiKey::ConsumerGroupHeartbeat, 0, 1, 0),
    row(ApiKey::ConsumerGroupDescribe, 0, 1, 0),
];

/// Decoders written ahead of their handlers (empty now: issue 38's transaction APIs and issue 40's
/// consumer group APIs were staged here until their handlers landed): neither advertised in
/// ApiVersions nor accepted by [`crate::requests::decode_request`], so a client never sends them
/// and a frame that does is refused like any unsupported version. The decoders, their round trips
/// and their fuzz targets run against these rows ([`crate::requests::decode_pending_body`]).
///
/// To switch an API on when its handler lands: move its row into [`SUPPORTED_APIS`], replacing
/// the API's row there if it has one (Produce, InitProducerId: the row here is the wider range),
/// and delete it here. The tests below check that every pending row is new or widens its
/// supported row, so a row left here after the switch fails them.
pub const PENDING_APIS: &[SupportedApi] = &[];

/// A version past kafka-protocol 0.15.1's range (it stops at Produce v11, EndTxn v4 and
/// TxnOffsetCommit v4) and the crate's version with the same bytes (Kafka 4.1.1's schemas add no
/// field at these versions, only meaning).
///
/// Why not kafka-protocol 0.18 beside 0.15.1 (two renamed versions): 0.18 no longer encodes
/// Produce v0–v2 or Fetch v0–v3, so both would stay, every shared struct would exist twice and
/// each handler would pick a crate by version; three versions reuse the older layout and one
/// response (EndTxn v5) adds two fixed fields, so the hand-written part is one small encoder,
/// checked byte for byte against Kafka 4.1.1's own classes (`txn_fixtures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PastCrate {
    /// The API.
    pub api_key: ApiKey,
    /// The version past the crate.
    pub version: i16,
    /// The crate's version whose request bytes are the same; `None` when the request adds
    /// fields and has its own type and encoder (DescribeCluster v2, ListTransactions v2: in
    /// `crate::requests`).
    pub request_as: Option<i16>,
    /// The crate's version whose response bytes are the same; `None` when the response adds
    /// fields and has its own encoder (EndTxn v5: `crate::responses::end_txn`).
    pub response_as: Option<i16>,
}

/// Every version Skiff decodes or encodes past kafka-protocol 0.15.1, and how it is encoded.
pub const PAST_CRATE: &[PastCrate] = &[
    // "Version 12 is the same as version 11" (request) and "the same as version 10" (response).
    PastCrate {
        api_key: ApiKey::Produce,
        version: 12,
        request_as: Some(11),
        response_as: Some(11),
    },
    // "Version 5 is the same with version 3" for the response; no request field either.
    PastCrate {
        api_key: ApiKey::TxnOffsetCommit,
        version: 5,
        request_as: Some(4),
        response_as: Some(4),
    },
    // The request is v4's; the response adds the producer id and epoch (TV2's epoch bump).
    PastCrate {
        api_key: ApiKey::EndTxn,
        version: 5,
        request_as: Some(4),
        response_as: None,
    },
    // KIP-1073's flag on the request, `is_fenced` in each broker of the response.
    PastCrate {
        api_key: ApiKey::DescribeCluster,
        version: 2,
        request_as: None,
        response_as: None,
    },
    // KIP-848's topic pattern sits between two v0 fields of the request (its own type and
    // encoder); the response's bytes are v0's, written by Skiff's own encoder at both versions.
    PastCrate {
        api_key: ApiKey::ConsumerGroupHeartbeat,
        version: 1,
        request_as: None,
        response_as: None,
    },
    // KIP-1099: v1's request is v0's bytes; the response adds each member's type (own encoder).
    PastCrate {
        api_key: ApiKey::ConsumerGroupDescribe,
        version: 1,
        request_as: Some(0),
        response_as: None,
    },
    // KIP-1152's pattern on the request; "Version 2 is the same as version 1" for the response.
    PastCrate {
        api_key: ApiKey::ListTransactions,
        version: 2,
        request_as: None,
        response_as: Some(1),
    },
];

fn past_crate(api_key: ApiKey, version: i16) -> Option<&'static PastCrate> {
    PAST_CRATE
        .iter()
        .find(|row| row.api_key == api_key && row.version == version)
}

/// The version to hand kafka-protocol's request encoder for `version` of `api_key` (tests and
/// the inter-broker client encode requests with the crate).
pub fn request_crate_version(api_key: ApiKey, version: i16) -> i16 {
    past_crate(api_key, version)
        .and_then(|row| row.request_as)
        .unwrap_or(version)
}

/// The version to hand kafka-protocol's response encoder for `version` of `api_key`: the same
/// version inside the crate's range, the equal older one past it. A version whose response has
/// its own encoder (see [`PastCrate::response_as`]) is passed through to that encoder.
pub fn response_crate_version(api_key: ApiKey, version: i16) -> i16 {
    past_crate(api_key, version)
        .and_then(|row| row.response_as)
        .unwrap_or(version)
}

/// The table row of `api_key`, if Skiff supports it at all.
pub fn supported(api_key: ApiKey) -> Option<&'static SupportedApi> {
    SUPPORTED_APIS.iter().find(|row| row.api_key == api_key)
}

/// The row the decoders follow for `api_key`: its pending row if it has one, else its supported
/// row. Only for the decoders' own tests and fuzzing ([`crate::requests::decode_pending_body`])
/// and for the flexible-encoding choice, never for what a peer may send.
pub fn decodable(api_key: ApiKey) -> Option<&'static SupportedApi> {
    PENDING_APIS
        .iter()
        .find(|row| row.api_key == api_key)
        .or_else(|| supported(api_key))
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

    fn all_rows() -> impl Iterator<Item = &'static SupportedApi> {
        SUPPORTED_APIS.iter().chain(PENDING_APIS)
    }

    #[test]
    fn header_versions_agree_with_kafka_protocol() {
        for row in all_rows() {
            let crate_max = row.api_key.valid_versions().max;
            for version in row.version_min..=row.version_max.min(crate_max) {
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

    /// The crate version a request of `version` reaches: the one with the same bytes, or for a
    /// version with its own encoder the newest one the crate knows below it.
    fn crate_encoded_max(api_key: ApiKey, version: i16) -> i16 {
        match past_crate(api_key, version) {
            Some(PastCrate {
                request_as: None, ..
            }) => version - 1,
            _ => request_crate_version(api_key, version),
        }
    }

    #[test]
    fn versions_past_the_crate_take_their_flexible_header_from_the_table() {
        // Kafka 4.1.1's schemas: Produce flexible from 9, EndTxn and TxnOffsetCommit from 3.
        for past in PAST_CRATE {
            let row = decodable(past.api_key).unwrap();
            assert!(row.supports(past.version), "{past:?}");
            assert_eq!(row.request_header_version(past.version), 2);
            assert_eq!(row.response_header_version(past.version), 1);
            if let Some(request_as) = past.request_as {
                assert_eq!(
                    row.api_key.request_header_version(request_as),
                    row.request_header_version(past.version)
                );
            }
        }
    }

    #[test]
    fn table_is_within_kafka_protocol_ranges_and_unique() {
        for table in [SUPPORTED_APIS, PENDING_APIS] {
            for (index, row) in table.iter().enumerate() {
                let range = row.api_key.valid_versions();
                let max = crate_encoded_max(row.api_key, row.version_max);
                assert!(row.version_min >= range.min && max <= range.max, "{row:?}");
                assert!(table
                    .iter()
                    .skip(index + 1)
                    .all(|other| other.api_key != row.api_key));
            }
        }
    }

    #[test]
    fn every_version_past_the_crate_is_listed() {
        for row in all_rows() {
            for version in row.version_min..=row.version_max {
                let crate_version = crate_encoded_max(row.api_key, version);
                assert!(
                    crate_version <= row.api_key.valid_versions().max,
                    "{row:?} v{version}"
                );
            }
        }
    }

    #[test]
    fn pending_rows_are_new_apis_or_widen_their_supported_row() {
        // A row switched on but left here would make the decoders' tests follow a stale range.
        for pending in PENDING_APIS {
            if let Some(row) = supported(pending.api_key) {
                assert_eq!(row.version_min, pending.version_min, "{pending:?}");
                assert_eq!(row.flexible_version_min, pending.flexible_version_min);
                assert!(
                    row.version_max < pending.version_max,
                    "{pending:?} is switched on"
                );
            }
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
