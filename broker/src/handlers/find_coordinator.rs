//! FindCoordinator (GroupCoordinator v0): each key needs Describe on its group (or transactional
//! id), else GROUP_AUTHORIZATION_FAILED (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the others are
//! handed to the group coordinator task, which names this broker for every group.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::net::session::Session;
use crate::security::acl::{Operation, ResourceType};

/// First version that batches keys (KIP-699) and so has no top-level error code.
const BATCHED_VERSION_MIN: i16 = 4;
/// Key type of a transactional id (0 is a group).
const KEY_TYPE_TRANSACTION: i8 = 1;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    mut request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let (resource_type, refused_code) = match request.key_type {
        KEY_TYPE_TRANSACTION => (
            ResourceType::TransactionalId,
            error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        _ => (ResourceType::Group, error_code::GROUP_AUTHORIZATION_FAILED),
    };
    let mut refused = Vec::new();
    if version >= BATCHED_VERSION_MIN {
        let (allowed, denied): (Vec<StrBytes>, Vec<StrBytes>) =
            std::mem::take(&mut request.coordinator_keys)
                .into_iter()
                .partition(|key| access.allows(Operation::Describe, resource_type, key.as_str()));
        request.coordinator_keys = allowed;
        refused = denied
            .into_iter()
            .map(|key| unavailable(key, refused_code))
            .collect();
        if request.coordinator_keys.is_empty() {
            return FindCoordinatorResponse::default().with_coordinators(refused);
        }
    } else if !access.allows(Operation::Describe, resource_type, request.key.as_str()) {
        return FindCoordinatorResponse::default()
            .with_error_code(refused_code)
            .with_node_id(BrokerId(-1))
            .with_port(-1);
    }
    let keys = request.coordinator_keys.clone();
    let mut response = match ctx
        .groups
        .call(header, GroupRequest::FindCoordinator(request))
        .await
    {
        Some(GroupReply::Group(Response::FindCoordinator(response))) => {
            through_own_listener(ctx, session, response)
        }
        _ if version >= BATCHED_VERSION_MIN => FindCoordinatorResponse::default()
            .with_coordinators(
                keys.into_iter()
                    .map(|key| unavailable(key, error_code::COORDINATOR_NOT_AVAILABLE))
                    .collect(),
            ),
        _ => FindCoordinatorResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    };
    response.coordinators.extend(refused);
    response
}

/// A batched answer naming no coordinator for `key`, with `error_code`.
fn unavailable(key: StrBytes, error_code: i16) -> Coordinator {
    Coordinator::default()
        .with_key(key)
        .with_node_id(BrokerId(-1))
        .with_port(-1)
        .with_error_code(error_code)
}

/// The coordinator names this node by its first listener; a client must reconnect through the
/// listener it came in on (an SSL client cannot talk to the PLAINTEXT port), so this node's
/// endpoint is replaced by the session's.
fn through_own_listener(
    ctx: &Ctx,
    session: &Session,
    mut response: FindCoordinatorResponse,
) -> FindCoordinatorResponse {
    let this_node = BrokerId(ctx.config.node_id);
    let host = StrBytes::from_string(session.advertised_host.clone());
    let port = i32::from(session.advertised_port);
    if response.node_id == this_node && response.port >= 0 {
        response.host = host.clone();
        response.port = port;
    }
    for coordinator in &mut response.coordinators {
        if coordinator.node_id == this_node && coordinator.port >= 0 {
            coordinator.host = host.clone();
            coordinator.port = port;
        }
    }
    response
}
