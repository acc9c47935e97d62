//! Bounded request decoders, one module per API, for every version in
//! [`crate::api::SUPPORTED_APIS`] and the staged [`crate::api::PENDING_APIS`] (decoded only by
//! [`decode_pending_body`], for tests and fuzzing, until the lead switches each on), filling
//! kafka-protocol's message structs. [`decode_request`]
//! is the broker's one entry point: header, version check, body. Bytes after the body's schema are
//! ignored there, as Kafka ignores them (`AbstractRequest.parseRequest` never looks at what is
//! left of the buffer; librdkafka 2.16 sends 3 such bytes after a Metadata v12 body);
//! [`decode_body`] stays exact for round trips.
//!
//! Must never: call kafka-protocol's `Decodable` on bytes from a peer (its array decoders reserve
//! memory for whatever count the peer sends), allocate by an unchecked count, or copy record sets
//! out of the frame.

pub mod source;

pub use consumer_group::{ConsumerGroupHeartbeatRequest, HEARTBEAT_REGEX_VERSION_MIN};
pub use describe_cluster::{DescribeClusterRequest, FENCED_BROKERS_VERSION_MIN};
pub use transactions_admin::{ListTransactionsRequest, ID_PATTERN_VERSION_MIN};

mod acls;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod alter_partition_reassignments;
mod api_versions;
mod client_quotas;
mod consumer_group;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod sasl;
mod scram;
mod sync_group;
mod transactions_admin;
mod txn_offset_commit;
mod write_txn_markers;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, EndTxnRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterPartitionReassignmentsRequest, CreatePartitionsRequest,
    IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest, SyncGroupRequest,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteRecordsRequest, DescribeLogDirsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, OffsetDeleteRequest, OffsetForLeaderEpochRequest,
};
use kafka_protocol::protocol::Encodable;

use crate::api::{self, ApiKey};
use crate::error::{DecodeError, EncodeError, RequestError};
use crate::header::decode_request_header;
use source::{BytesSource, Source};

/// Whether `version` of `api_key` uses the flexible encoding (from the one version table, or the
/// API's pending row: the first flexible version is the same in both).
pub(crate) fn flexible(api_key: ApiKey, version: i16) -> bool {
    api::decodable(api_key).is_some_and(|row| row.is_flexible(version))
}

/// Fewest bytes a string field takes: its length prefix.
pub(crate) fn string_bytes_min(compact: bool) -> usize {
    if compact {
        1
    } else {
        2
    }
}

/// Fewest bytes an array (or a bytes field) takes: its count or length prefix.
pub(crate) fn array_bytes_min(compact: bool) -> usize {
    if compact {
        1
    } else {
        4
    }
}

/// A topic entry of a name, an int32 partition array and (flexible versions) tagged fields, the
/// shape DescribeLogDirs and ListPartitionReassignments share.
pub(crate) fn topic_partition_indexes<S: Source>(
    s: &mut S,
    compact: bool,
) -> Result<
    (
        kafka_protocol::messages::TopicName,
        Vec<i32>,
        source::TaggedFields,
    ),
    DecodeError,
> {
    let name = kafka_protocol::messages::TopicName(s.string(compact)?);
    let partitions = source::array(
        s,
        compact,
        4,
        crate::limits::PARTITIONS_PER_TOPIC_MAX,
        |s| s.i32(),
    )?;
    let tags = if compact {
        s.unknown_tagged_fields()?
    } else {
        source::TaggedFields::new()
    };
    Ok((name, partitions, tags))
}

/// Fewest bytes of a [`topic_partition_indexes`] entry: the name's and the array's prefixes.
pub(crate) fn topic_partition_indexes_bytes_min(compact: bool) -> usize {
    string_bytes_min(compact) + array_bytes_min(compact)
}

macro_rules! requests {
    ($( $variant:ident($ty:ty) = $decode:path; )*) => {
        /// A decoded request body, one variant per supported API: the broker's single dispatch
        /// `match` is over this enum. Deliberately exhaustive (no `#[non_exhaustive]`): a new
        /// decoder must not compile until the broker's dispatch handles it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $(
                #[doc = concat!("`", stringify!($ty), "`.")]
                $variant($ty),
            )*
        }

        impl Request {
            /// The API this request belongs to.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $( Self::$variant(_) => ApiKey::$variant, )*
                }
            }

            /// Encodes the body with kafka-protocol's encoder — the client side, for tests,
            /// benches and fuzz round trips. Never the other direction. A version past the
            /// crate's range is encoded as the crate's version with the same bytes
            /// ([`api::request_crate_version`]).
            pub fn encode_body(&self, version: i16) -> Result<BytesMut, EncodeError> {
                let mut out = BytesMut::new();
                let crate_version = api::request_crate_version(self.api_key(), version);
                let result = match self {
                    $( Self::$variant(message) => message.encode(&mut out, crate_version), )*
                };
                result.map_err(|error| EncodeError::Message {
                    api_key: self.api_key() as i16,
                    api_version: version,
                    reason: error.to_string(),
                })?;
                Ok(out)
            }
        }

        /// Decodes the body of one request from any [`Source`] (the frame reader, or the
        /// sample generator in tests). Does not check for trailing bytes.
        pub(crate) fn decode_from<S: Source>(
            source: &mut S,
            api_key: ApiKey,
            version: i16,
        ) -> Result<Request, DecodeError> {
            match api_key {
                $( ApiKey::$variant => Ok(Request::$variant($decode(source, version)?)), )*
                _ => Err(DecodeError::Invalid { reason: "api key has no decoder" }),
            }
        }
    };
}

requests! {
    Produce(ProduceRequest) = produce::decode;
    Fetch(FetchRequest) = fetch::decode;
    ListOffsets(ListOffsetsRequest) = list_offsets::decode;
    Metadata(MetadataRequest) = metadata::decode;
    OffsetCommit(OffsetCommitRequest) = offset_commit::decode;
    OffsetFetch(OffsetFetchRequest) = offset_fetch::decode;
    FindCoordinator(FindCoordinatorRequest) = find_coordinator::decode;
    JoinGroup(JoinGroupRequest) = join_group::decode;
    Heartbeat(HeartbeatRequest) = heartbeat::decode;
    LeaveGroup(LeaveGroupRequest) = leave_group::decode;
    SyncGroup(SyncGroupRequest) = sync_group::decode;
    DescribeGroups(DescribeGroupsRequest) = describe_groups::decode;
    ListGroups(ListGroupsRequest) = list_groups::decode;
    SaslHandshake(SaslHandshakeRequest) = sasl::decode_handshake;
    ApiVersions(ApiVersionsRequest) = api_versions::decode;
    CreateTopics(CreateTopicsRequest) = create_topics::decode;
    DeleteTopics(DeleteTopicsRequest) = delete_topics::decode;
    InitProducerId(InitProducerIdRequest) = init_producer_id::decode;
    DescribeConfigs(DescribeConfigsRequest) = describe_configs::decode;
    SaslAuthenticate(SaslAuthenticateRequest) = sasl::decode_authenticate;
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest) = offset_for_leader_epoch::decode;
    // Config and partition admin APIs.
    AlterConfigs(AlterConfigsRequest) = alter_configs::decode;
    CreatePartitions(CreatePartitionsRequest) = create_partitions::decode;
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest) = incremental_alter_configs::decode;
    DeleteRecords(DeleteRecordsRequest) = delete_records::decode;
    DescribeLogDirs(DescribeLogDirsRequest) = describe_log_dirs::decode;
    DeleteGroups(DeleteGroupsRequest) = delete_groups::decode;
    ListPartitionReassignments(ListPartitionReassignmentsRequest) = list_partition_reassignments::decode;
    OffsetDelete(OffsetDeleteRequest) = offset_delete::decode;
    // Cluster admin APIs.
    ElectLeaders(ElectLeadersRequest) = elect_leaders::decode;
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest) = alter_partition_reassignments::decode;
    // Security admin APIs.
    DescribeAcls(DescribeAclsRequest) = acls::decode_describe;
    CreateAcls(CreateAclsRequest) = acls::decode_create;
    DeleteAcls(DeleteAclsRequest) = acls::decode_delete;
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest) = scram::decode_describe;
    AlterUserScramCredentials(AlterUserScramCredentialsRequest) = scram::decode_alter;
    DescribeCluster(DescribeClusterRequest) = describe_cluster::decode;
    // Client quota admin APIs.
    DescribeClientQuotas(DescribeClientQuotasRequest) = client_quotas::decode_describe;
    AlterClientQuotas(AlterClientQuotasRequest) = client_quotas::decode_alter;
    // Transactions (issue 38).
    AddPartitionsToTxn(AddPartitionsToTxnRequest) = add_partitions_to_txn::decode;
    AddOffsetsToTxn(AddOffsetsToTxnRequest) = add_offsets_to_txn::decode;
    EndTxn(EndTxnRequest) = end_txn::decode;
    WriteTxnMarkers(WriteTxnMarkersRequest) = write_txn_markers::decode;
    TxnOffsetCommit(TxnOffsetCommitRequest) = txn_offset_commit::decode;
    DescribeProducers(DescribeProducersRequest) = transactions_admin::decode_describe_producers;
    DescribeTransactions(DescribeTransactionsRequest) = transactions_admin::decode_describe;
    ListTransactions(ListTransactionsRequest) = transactions_admin::decode_list;
    // KIP-848 consumer groups (issue 40).
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest) = consumer_group::decode_heartbeat;
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest) = consumer_group::decode_describe;
}

/// Decodes one request frame body (the bytes after the 4-byte size prefix): header, supported
/// version check, body. Byte fields of the result share `frame`.
///
/// Bytes after the body's schema are ignored, as Kafka's broker ignores them: the frame was
/// already bounded by the request size limit before it was read, and the body's own fields were
/// read with every bound, so ignoring the rest costs nothing and answers clients (librdkafka
/// 2.16's pipelined Metadata v12) that Kafka answers.
pub fn decode_request(frame: &Bytes) -> Result<(RequestHeader, Request), RequestError> {
    decode_request_with_rest(frame).map(|(header, request, _)| (header, request))
}

/// [`decode_request`], and how many bytes after the body's schema it ignored (the replay corpus
/// of captured client frames keeps the frames that have some, such as librdkafka's Metadata v12).
pub fn decode_request_with_rest(
    frame: &Bytes,
) -> Result<(RequestHeader, Request, usize), RequestError> {
    let mut source = BytesSource::new(frame);
    let (header, row) = decode_request_header(&mut source)?;
    let version = header.request_api_version;
    let body_error = |source| RequestError::Body {
        api_key: header.request_api_key,
        api_version: version,
        correlation_id: header.correlation_id,
        source,
    };
    let request = decode_from(&mut source, row.api_key, version).map_err(body_error)?;
    let rest = frame.len().saturating_sub(source.position());
    Ok((header, request, rest))
}

/// Decodes a request body alone (no header) of `api_key` at `version`; the version must be in
/// [`crate::api::SUPPORTED_APIS`]. Exact, unlike [`decode_request`]: a byte after the schema is
/// [`DecodeError::TrailingBytes`], so that round trips (tests, fuzz) see every byte accounted for.
pub fn decode_body(api_key: ApiKey, version: i16, body: &Bytes) -> Result<Request, DecodeError> {
    if !api::supported(api_key).is_some_and(|row| row.supports(version)) {
        return Err(DecodeError::Invalid {
            reason: "api key or version not supported",
        });
    }
    decode_exact(api_key, version, body)
}

/// [`decode_body`] over the decoders' own range ([`crate::api::decodable`]): also the versions
/// and APIs staged in [`crate::api::PENDING_APIS`], which no client is offered yet. For the
/// decoders' tests and fuzz targets only; the broker decodes with [`decode_request`], which
/// refuses what ApiVersions does not advertise.
pub fn decode_pending_body(
    api_key: ApiKey,
    version: i16,
    body: &Bytes,
) -> Result<Request, DecodeError> {
    if !api::decodable(api_key).is_some_and(|row| row.supports(version)) {
        return Err(DecodeError::Invalid {
            reason: "api key or version has no decoder",
        });
    }
    decode_exact(api_key, version, body)
}

fn decode_exact(api_key: ApiKey, version: i16, body: &Bytes) -> Result<Request, DecodeError> {
    let mut source = BytesSource::new(body);
    let request = decode_from(&mut source, api_key, version)?;
    source.finish()?;
    Ok(request)
}

#[cfg(test)]
mod tests;
