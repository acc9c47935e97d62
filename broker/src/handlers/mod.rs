//! The single dispatch table: decode a frame with the protocol crate's bounded decoders, call the
//! handler of its API (one file each), and encode the answer. Request-level problems become Kafka
//! error codes inside responses; only a frame that cannot be answered closes the connection.
//!
//! What several handlers share (leadership, config resources, error-code mapping) is in
//! [`common`]: a handler imports another handler only through it.
//!
//! Must never: decode bytes with kafka-protocol's `Decodable`, or let a handler's error close a
//! connection that could have been answered.

mod api_versions;
mod common;

// Config and partition admin APIs.
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod create_partitions;
mod incremental_alter_configs;

mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_topics;
// Security admin APIs.
mod alter_user_scram_credentials;
mod create_acls;
mod delete_acls;
mod describe_acls;
mod describe_cluster;
mod describe_user_scram_credentials;

mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_client_quotas;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod elect_leaders;
mod fetch;
mod find_coordinator;
mod heartbeat;
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
mod offsets_for_leader_epoch;
mod produce;
mod sasl_authenticate;
mod sasl_handshake;
mod sync_group;
// Transactions (issue 38).
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod describe_transactions;
mod end_txn;
mod list_transactions;
mod txn_offset_commit;
mod write_txn_markers;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Encodable;
use skiff_protocol::api;
use skiff_protocol::error::RequestError;
pub(crate) use skiff_protocol::error_code;
use skiff_protocol::requests::{decode_request, Request};

use crate::context::Ctx;
use crate::metrics::Served;
use crate::response::ResponsePart;
use crate::security::sasl::Authenticator;
use crate::security::session::Session;
use common::remote::RemoteTime;
use common::throttle::{Busy, ThrottleField, Timed, Turn};

/// The APIs this broker answers; ApiVersions advertises exactly these (at the versions the
/// protocol crate decodes), and `every_advertised_api_has_a_handler` checks the match below.
pub(crate) const HANDLED_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DescribeConfigs,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    // Config and partition admin APIs.
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DeleteRecords,
    ApiKey::DescribeLogDirs,
    ApiKey::DeleteGroups,
    ApiKey::ListPartitionReassignments,
    ApiKey::OffsetDelete,
    // Cluster admin APIs.
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    // Security admin APIs.
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeCluster,
    // Client quota admin APIs.
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    // Transactions (issue 38): the coordinator's APIs.
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    // Transactions (issue 38): the partition's and the group's APIs.
    ApiKey::TxnOffsetCommit,
    ApiKey::WriteTxnMarkers,
    ApiKey::DescribeProducers,
    // KIP-848 consumer groups (issue 40).
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

/// What to do after a frame.
pub(crate) struct Outcome {
    /// The response to write, if any (Produce with acks=0 has none).
    pub(crate) response: Option<Vec<ResponsePart>>,
    /// Close the connection after writing (the frame could not be understood).
    pub(crate) close: bool,
    /// The SASL exchange succeeded with this frame, for this user.
    pub(crate) authenticated: Option<String>,
    /// Milliseconds the connection reads nothing after writing the response: the client went
    /// over a quota (KIP-219; the response's `throttle_time_ms` says the same where it has one).
    pub(crate) throttle_ms: u64,
    /// A decoded request's figures, which the connection records once the response is written
    /// (one clock read for its latency and service time).
    pub(crate) served: Option<Served>,
}

impl Outcome {
    fn respond(parts: Vec<ResponsePart>) -> Self {
        Self {
            response: Some(parts),
            close: false,
            authenticated: None,
            throttle_ms: 0,
            served: None,
        }
    }

    fn close() -> Self {
        Self {
            response: None,
            close: true,
            authenticated: None,
            throttle_ms: 0,
            served: None,
        }
    }

    fn nothing() -> Self {
        Self {
            response: None,
            close: false,
            authenticated: None,
            throttle_ms: 0,
            served: None,
        }
    }

    /// Carries out what a SASL step decided for the connection.
    fn with_sasl_effect(mut self, effect: sasl_authenticate::Effect) -> Self {
        match effect {
            sasl_authenticate::Effect::Continue => {}
            sasl_authenticate::Effect::Authenticated(user) => self.authenticated = Some(user),
            sasl_authenticate::Effect::Close => self.close = true,
        }
        self
    }

    /// An encoded answer, or a close if it could not be encoded.
    fn encoded(encoded: Result<Bytes, EncodeError>, correlation_id: i32) -> Self {
        match encoded {
            Ok(bytes) => Self::respond(vec![ResponsePart::Bytes(bytes)]),
            Err(error) => {
                tracing::error!(%error, correlation_id, "cannot encode response");
                Self::close()
            }
        }
    }
}

/// Handles one frame body. `sasl` is the connection's SASL exchange while it is not finished (on
/// SASL listeners); until it is, only ApiVersions and the SASL APIs are served. The request's
/// timing is the connection's: it started the clock when the frame was in and reads it once the
/// response is written (`Outcome::served`).
pub(crate) async fn handle_frame(
    ctx: &Ctx,
    session: &Session,
    sasl: Option<&mut Authenticator>,
    frame: Bytes,
) -> Outcome {
    let (header, request) = match decode_request(&frame) {
        Ok(decoded) => decoded,
        Err(error) => return undecodable(error),
    };
    let frame_bytes = frame.len();
    let api_key = header.request_api_key;
    let busy = Busy::default();
    // A cheap copy (a shared buffer), as `dispatch` takes the header.
    let client_id = header.client_id.clone();
    let turn = Turn::new(
        &ctx.quotas,
        &session.principal.user,
        client_id.as_deref().unwrap_or(""),
        &busy,
        frame_bytes,
    );
    let remote = RemoteTime::default();
    let at = (&turn, &remote);
    let mut outcome = match sasl {
        Some(authenticator) if !authenticator.is_authenticated() => {
            // The SASL exchange is never throttled (Kafka's authenticator runs before quotas).
            turn.exempt();
            sasl_gate(ctx, session, authenticator, at, header, request).await
        }
        // Without quotas nothing reads the request's polling time: no clock reads per poll.
        _ if !ctx.quotas.active() => dispatch(ctx, session, at, header, request).await,
        _ => {
            let handling = std::pin::pin!(dispatch(ctx, session, at, header, request));
            Timed::new(handling, &busy).await
        }
    };
    outcome.throttle_ms = turn.finish_request_time();
    let bytes_out: u64 = outcome
        .response
        .iter()
        .flatten()
        // What the response puts on the wire; a converted record set counts its declared size,
        // which is exactly what is sent for it.
        .map(|part| part.wire_len() as u64)
        .sum();
    outcome.served = Some(Served {
        api_key,
        bytes_in: frame_bytes,
        bytes_out,
        remote: remote.total(),
    });
    outcome
}

/// A request on a SASL listener before authentication: ApiVersions and the SASL exchange are
/// answered, anything else closes the connection (Kafka's SaslServerAuthenticator does the same).
async fn sasl_gate(
    ctx: &Ctx,
    session: &Session,
    authenticator: &mut Authenticator,
    (turn, remote): (&Turn<'_>, &RemoteTime),
    header: RequestHeader,
    request: Request,
) -> Outcome {
    let correlation_id = header.correlation_id;
    match request {
        Request::ApiVersions(_) => dispatch(ctx, session, (turn, remote), header, request).await,
        Request::SaslHandshake(request) => {
            let (response, close) = sasl_handshake::handle(Some(authenticator), &header, request);
            let mut outcome = Outcome::encoded(encode(&header, &response), correlation_id);
            outcome.close |= close;
            outcome
        }
        Request::SaslAuthenticate(request) => {
            let (response, effect) =
                sasl_authenticate::handle(Some(authenticator), &header, request);
            Outcome::encoded(encode(&header, &response), correlation_id).with_sasl_effect(effect)
        }
        other => {
            tracing::debug!(api = ?other.api_key(), "request before SASL authentication; closing");
            Outcome::close()
        }
    }
}

/// One bare SASL token (after a v0 SaslHandshake), answered as a bare size-prefixed token.
pub(crate) fn handle_bare_sasl_token(authenticator: &mut Authenticator, token: &[u8]) -> Outcome {
    let (answer, effect) = sasl_authenticate::bare_token(authenticator, token);
    let outcome = match answer {
        Some(bytes) => Outcome::respond(vec![ResponsePart::Bytes(bytes)]),
        None => Outcome::close(),
    };
    outcome.with_sasl_effect(effect)
}

/// Calls the handler of the request's API and encodes its answer. The handlers that wait on
/// others (Fetch, Produce) time those waits in `remote`.
async fn dispatch(
    ctx: &Ctx,
    session: &Session,
    (turn, remote): (&Turn<'_>, &RemoteTime),
    header: RequestHeader,
    request: Request,
) -> Outcome {
    let version = header.request_api_version;
    let correlation_id = header.correlation_id;
    tracing::trace!(api = ?request.api_key(), version, correlation_id, "request");
    // The usual handler: `<module>::handle(ctx, session, &header, request).await`, answered.
    macro_rules! handled {
        ($module:ident, $request:expr) => {
            answer(
                turn,
                &header,
                $module::handle(ctx, session, &header, $request).await,
            )
        };
    }
    // No catch-all arm: every request the protocol crate decodes has an arm here, so a new
    // decoder without one does not compile.
    let encoded = match request {
        Request::ApiVersions(r) => answer(turn, &header, api_versions::handle(ctx, &header, r)),
        Request::Metadata(r) => handled!(metadata, r),
        Request::CreateTopics(r) => {
            let response = create_topics::handle(ctx, session, turn, &header, r).await;
            answer(turn, &header, response)
        }
        Request::DeleteTopics(r) => {
            let response = delete_topics::handle(ctx, session, turn, &header, r).await;
            answer(turn, &header, response)
        }
        Request::DescribeConfigs(r) => answer(
            turn,
            &header,
            describe_configs::handle(ctx, session, &header, r),
        ),
        Request::ListOffsets(r) => handled!(list_offsets, r),
        Request::Produce(r) => {
            let response = produce::handle(ctx, session, remote, &header, r).await;
            // Counted after the append, as Kafka does; acks=0 is throttled too (muted, no answer).
            turn.record_produce();
            match response {
                Some(response) => answer(turn, &header, response),
                None => return Outcome::nothing(),
            }
        }
        Request::Fetch(r) => {
            let at = (turn, remote);
            return Outcome::respond(fetch::handle(ctx, session, at, &header, r).await);
        }
        Request::FindCoordinator(r) => handled!(find_coordinator, r),
        Request::JoinGroup(r) => handled!(join_group, r),
        Request::SyncGroup(r) => handled!(sync_group, r),
        Request::Heartbeat(r) => handled!(heartbeat, r),
        Request::LeaveGroup(r) => handled!(leave_group, r),
        Request::OffsetCommit(r) => handled!(offset_commit, r),
        Request::OffsetFetch(r) => handled!(offset_fetch, r),
        Request::DescribeGroups(r) => handled!(describe_groups, r),
        Request::ListGroups(r) => handled!(list_groups, r),
        Request::InitProducerId(r) => handled!(init_producer_id, r),
        // Outside the SASL gate (a listener without SASL, or after authentication): Kafka answers
        // ILLEGAL_SASL_STATE and keeps the connection.
        Request::SaslHandshake(r) => {
            answer(turn, &header, sasl_handshake::handle(None, &header, r).0)
        }
        Request::SaslAuthenticate(r) => {
            answer(turn, &header, sasl_authenticate::handle(None, &header, r).0)
        }
        // Config and partition admin APIs.
        Request::AlterConfigs(r) => handled!(alter_configs, r),
        Request::CreatePartitions(r) => {
            let response = create_partitions::handle(ctx, session, turn, &header, r).await;
            answer(turn, &header, response)
        }
        Request::IncrementalAlterConfigs(r) => handled!(incremental_alter_configs, r),
        Request::OffsetForLeaderEpoch(r) => handled!(offsets_for_leader_epoch, r),
        Request::DeleteRecords(r) => handled!(delete_records, r),
        Request::DescribeLogDirs(r) => handled!(describe_log_dirs, r),
        Request::DeleteGroups(r) => handled!(delete_groups, r),
        Request::ListPartitionReassignments(r) => answer(
            turn,
            &header,
            list_partition_reassignments::handle(ctx, session, &header, r),
        ),
        Request::OffsetDelete(r) => handled!(offset_delete, r),
        // Cluster admin APIs.
        Request::ElectLeaders(r) => handled!(elect_leaders, r),
        Request::AlterPartitionReassignments(r) => handled!(alter_partition_reassignments, r),
        // Security admin APIs.
        Request::DescribeAcls(r) => handled!(describe_acls, r),
        Request::CreateAcls(r) => handled!(create_acls, r),
        Request::DeleteAcls(r) => handled!(delete_acls, r),
        Request::DescribeUserScramCredentials(r) => handled!(describe_user_scram_credentials, r),
        Request::AlterUserScramCredentials(r) => handled!(alter_user_scram_credentials, r),
        Request::DescribeCluster(r) => answer(
            turn,
            &header,
            describe_cluster::handle(ctx, session, &header, r),
        ),
        // Client quota admin APIs.
        Request::DescribeClientQuotas(r) => handled!(describe_client_quotas, r),
        Request::AlterClientQuotas(r) => handled!(alter_client_quotas, r),
        // Transactions (issue 38): the coordinator's APIs.
        Request::AddPartitionsToTxn(r) => handled!(add_partitions_to_txn, r),
        Request::AddOffsetsToTxn(r) => handled!(add_offsets_to_txn, r),
        Request::EndTxn(r) => handled!(end_txn, r),
        Request::DescribeTransactions(r) => handled!(describe_transactions, r),
        Request::ListTransactions(r) => handled!(list_transactions, r),
        // The partition's and the group's.
        Request::TxnOffsetCommit(r) => handled!(txn_offset_commit, r),
        Request::WriteTxnMarkers(r) => handled!(write_txn_markers, r),
        Request::DescribeProducers(r) => handled!(describe_producers, r),
        // KIP-848 consumer groups (issue 40).
        Request::ConsumerGroupHeartbeat(r) => handled!(consumer_group_heartbeat, r),
        Request::ConsumerGroupDescribe(r) => handled!(consumer_group_describe, r),
    };
    Outcome::encoded(encoded, correlation_id)
}

/// A frame the decoders refused. ApiVersions at an unknown version is answered (KIP-511: a v0
/// response with UNSUPPORTED_VERSION and the version list); everything else closes, as Kafka does,
/// because there is no version of the response the client is sure to parse.
fn undecodable(error: RequestError) -> Outcome {
    tracing::debug!(%error, "undecodable request");
    match error {
        RequestError::UnsupportedVersion {
            api_key,
            correlation_id,
            ..
        } if api_key == ApiKey::ApiVersions as i16 => {
            let response = api_versions::unsupported_version_response();
            let header = RequestHeader::default()
                .with_request_api_key(api_key)
                .with_request_api_version(0)
                .with_correlation_id(correlation_id);
            match encode(&header, &response) {
                Ok(bytes) => Outcome::respond(vec![ResponsePart::Bytes(bytes)]),
                Err(_) => Outcome::close(),
            }
        }
        _ => Outcome::close(),
    }
}

/// Why a response could not be encoded: the connection is closed instead of answering.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EncodeError {
    /// kafka-protocol refused the response at this version (a field the version cannot carry).
    #[error("cannot encode the response at version {version}: {source}")]
    Schema {
        /// The request's version.
        version: i16,
        /// What the encoder said.
        source: anyhow::Error,
    },
    /// The response is larger than a frame's i32 size prefix can say.
    #[error("response of {bytes} bytes does not fit a frame")]
    TooLarge {
        /// Header and body bytes.
        bytes: usize,
    },
}

/// Fills in the request's throttle (its time recorded now, its byte and mutation throttles
/// already) and encodes.
fn answer<R: Encodable + ThrottleField>(
    turn: &Turn<'_>,
    header: &RequestHeader,
    mut response: R,
) -> Result<Bytes, EncodeError> {
    turn.finish_request_time();
    response.set_throttle_time_ms(turn.throttle_field());
    encode(header, &response)
}

/// Encodes `response` at the request's version, with the size prefix and response header.
fn encode<R: Encodable>(header: &RequestHeader, response: &R) -> Result<Bytes, EncodeError> {
    let version = header.request_api_version;
    let schema = |source| EncodeError::Schema { version, source };
    let api_key = ApiKey::try_from(header.request_api_key).ok();
    let header_version = api_key
        .and_then(api::decodable)
        .map(|row| row.response_header_version(version))
        .unwrap_or(0);
    // Past kafka-protocol's range (Produce v12, TxnOffsetCommit v5) the crate encodes the older
    // version with the same bytes.
    let version = api_key.map_or(version, |key| api::response_crate_version(key, version));
    let body_bytes = response.compute_size(version).map_err(schema)?;
    let header_bytes = skiff_protocol::header::response_header_bytes(header_version);
    let bytes = header_bytes + body_bytes;
    let size = i32::try_from(bytes).map_err(|_| EncodeError::TooLarge { bytes })?;
    let mut out = BytesMut::with_capacity(4 + bytes);
    out.extend_from_slice(&size.to_be_bytes());
    skiff_protocol::header::put_response_header(&mut out, header_version, header.correlation_id);
    response.encode(&mut out, version).map_err(schema)?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handled_apis_are_exactly_the_decoded_ones() {
        // `dispatch` matches every `Request` variant (no catch-all), so what is decoded is handled;
        // this checks that the advertised list names exactly those APIs, each once.
        let mut handled: Vec<i16> = HANDLED_APIS.iter().map(|key| *key as i16).collect();
        let mut decoded: Vec<i16> = api::SUPPORTED_APIS
            .iter()
            .map(|row| row.api_key as i16)
            .collect();
        handled.sort_unstable();
        decoded.sort_unstable();
        assert_eq!(handled, decoded);
        let mut advertised: Vec<i16> = api_versions::advertised(None)
            .iter()
            .map(|entry| entry.api_key)
            .collect();
        advertised.sort_unstable();
        assert_eq!(advertised, decoded);
    }
}
