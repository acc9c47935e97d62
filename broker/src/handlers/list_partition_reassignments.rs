//! ListPartitionReassignments: one node never moves a replica, so no reassignment is ever in
//! progress and the answer lists none. Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED
//! otherwise). Topics the request names that do not exist are left out without an error, as
//! Kafka's controller does (`ReplicationControlManager.listPartitionReassignments` skips a name it
//! does not know).
//!
//! Must never: report a reassignment (there is no replica movement to report).

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, RequestHeader,
};

use super::error_code;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::security::acl::Operation;

pub(crate) fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    _request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let access = ctx.access(session, header.request_api_key);
    let response = ListPartitionReassignmentsResponse::default();
    if !access.allows_cluster(Operation::Describe) {
        return response.with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED);
    }
    response
}
