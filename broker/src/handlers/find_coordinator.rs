//! FindCoordinator (GroupCoordinator v0), answered from the cluster image: a group's coordinator
//! is the leader of its `__consumer_offsets` partition, a transactional id's the leader of its
//! `__transaction_state` partition (Kafka's hash of the key in both), named by node id at its
//! endpoint for the listener the client came in on. Each internal topic is created on the first
//! FindCoordinator for its key type, as Kafka does. Each key needs Describe on its group (or
//! transactional id), else GROUP_AUTHORIZATION_FAILED (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//!
//! Must never: name a broker the image does not have live.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::cluster::roles::GroupCoordinator;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// First version that batches keys (KIP-699) and so has no top-level error code.
const BATCHED_VERSION_MIN: i16 = 4;
/// First version with an error message.
const ERROR_MESSAGE_VERSION_MIN: i16 = 1;
/// Key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// Key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// Key type of a share group (v6, KIP-932): Skiff has no share groups.
const KEY_TYPE_SHARE: i8 = 2;

/// A coordinator's address, or the error (with a message) the key gets.
type Located = Result<(i32, String, i32), (i16, String)>;

/// The error a key of `key_type` gets before its coordinator is looked up, if any. A group's key
/// may be empty: Kafka locates the coordinator of the empty group id like any other (only the
/// membership APIs refuse it), and old Java consumers (0.10.0) that assign partitions without a
/// `group.id` look it up on every poll. A transactional id may not be empty (INVALID_REQUEST, as
/// Kafka answers).
fn refused(key_type: i8, key: &str) -> Option<(i16, String)> {
    match key_type {
        KEY_TYPE_GROUP => None,
        KEY_TYPE_TRANSACTION if key.is_empty() => Some((
            error_code::INVALID_REQUEST,
            "the transactional id is empty".to_owned(),
        )),
        KEY_TYPE_TRANSACTION => None,
        KEY_TYPE_SHARE => Some((
            error_code::INVALID_REQUEST,
            "share groups are not served by this broker".to_owned(),
        )),
        other => Some((
            error_code::INVALID_REQUEST,
            format!("unknown key type {other}"),
        )),
    }
}

/// Where the coordinator of `key` is: the leader of its internal topic's partition, creating that
/// topic first if it does not exist yet.
async fn find(ctx: &Ctx, key_type: i8, key: &str) -> Result<GroupCoordinator, (i16, String)> {
    let lookup = |ctx: &Ctx| match key_type {
        KEY_TYPE_TRANSACTION => ctx.cluster.transaction_coordinator_of(key),
        _ => ctx.cluster.coordinator_of(key),
    };
    let found = lookup(ctx);
    if found != GroupCoordinator::NoOffsetsTopic {
        return Ok(found);
    }
    let creation = ctx.topic_creation();
    let created = match key_type {
        KEY_TYPE_TRANSACTION => creation.ensure_transaction_state_topic().await,
        _ => creation.ensure_offsets_topic().await,
    };
    match created {
        Ok(()) => Ok(lookup(ctx)),
        Err(error) => Err((error_code::COORDINATOR_NOT_AVAILABLE, error.to_string())),
    }
}

/// Where the coordinator of `key` is.
async fn locate(ctx: &Ctx, session: &Session, key_type: i8, key: &str) -> Located {
    if let Some(error) = refused(key_type, key) {
        return Err(error);
    }
    let found = find(ctx, key_type, key).await?;
    let not_available = |why: &str| Err((error_code::COORDINATOR_NOT_AVAILABLE, why.to_owned()));
    match found {
        GroupCoordinator::Broker(broker) if broker.node_id == ctx.config.node_id => Ok((
            broker.node_id,
            session.advertised_host.clone(),
            i32::from(session.advertised_port),
        )),
        GroupCoordinator::Broker(broker) => {
            match broker
                .listeners
                .iter()
                .find(|listener| listener.name == session.listener_name)
            {
                Some(endpoint) => Ok((
                    broker.node_id,
                    endpoint.host.clone(),
                    i32::from(endpoint.port),
                )),
                None => not_available("the coordinator has no endpoint for this listener"),
            }
        }
        GroupCoordinator::Unavailable | GroupCoordinator::NoOffsetsTopic => {
            not_available("the coordinator's partition has no leader")
        }
    }
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let key_type = if version >= 1 {
        request.key_type
    } else {
        KEY_TYPE_GROUP
    };
    let (resource_type, refused_code) = match key_type {
        KEY_TYPE_TRANSACTION => (
            ResourceType::TransactionalId,
            error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        _ => (ResourceType::Group, error_code::GROUP_AUTHORIZATION_FAILED),
    };
    let answer = async |key: &str| -> Located {
        if !access.allows(Operation::Describe, resource_type, key) {
            return Err((refused_code, "not authorized".to_owned()));
        }
        locate(ctx, session, key_type, key).await
    };
    if version >= BATCHED_VERSION_MIN {
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in request.coordinator_keys {
            let entry = Coordinator::default().with_key(key.clone());
            coordinators.push(match answer(key.as_str()).await {
                Ok((node_id, host, port)) => entry
                    .with_node_id(BrokerId(node_id))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port),
                Err((code, message)) => entry
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message)))
                    .with_node_id(BrokerId(-1))
                    .with_port(-1),
            });
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match answer(request.key.as_str()).await {
        Ok((node_id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node_id))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => {
            let response = FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1))
                .with_port(-1);
            if version >= ERROR_MESSAGE_VERSION_MIN {
                response.with_error_message(Some(StrBytes::from_string(message)))
            } else {
                response
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_empty_transactional_ids_and_unknown_key_types_are_refused() {
        // The empty group id included: the key is not looked at.
        assert_eq!(refused(KEY_TYPE_GROUP, ""), None);
        assert_eq!(refused(KEY_TYPE_TRANSACTION, "txn"), None);
        assert_eq!(
            refused(KEY_TYPE_TRANSACTION, "").map(|(code, _)| code),
            Some(error_code::INVALID_REQUEST)
        );
        assert_eq!(
            refused(7, "x").map(|(code, _)| code),
            Some(error_code::INVALID_REQUEST)
        );
        let (code, message) = refused(KEY_TYPE_SHARE, "share").expect("refused");
        assert_eq!(code, error_code::INVALID_REQUEST);
        assert!(message.contains("share groups"), "{message}");
    }
}
