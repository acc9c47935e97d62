//! FindCoordinator (GroupCoordinator v0): handed to the group coordinator task, which names this
//! broker for every group.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, RequestHeader,
};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

/// First version that batches keys (KIP-699) and so has no top-level error code.
const BATCHED_VERSION_MIN: i16 = 4;

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys = request.coordinator_keys.clone();
    match ctx
        .groups
        .call(header, GroupRequest::FindCoordinator(request))
        .await
    {
        Some(GroupReply::Group(Response::FindCoordinator(response))) => response,
        _ if header.request_api_version >= BATCHED_VERSION_MIN => {
            FindCoordinatorResponse::default().with_coordinators(
                keys.into_iter()
                    .map(|key| {
                        Coordinator::default()
                            .with_key(key)
                            .with_node_id(BrokerId(-1))
                            .with_port(-1)
                            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
                    })
                    .collect(),
            )
        }
        _ => FindCoordinatorResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}
