//! What the ACL and SCRAM admin handlers share: the gate of the ACL APIs (an authorizer must be
//! configured, SECURITY_DISABLED otherwise; then the cluster operation Kafka requires,
//! CLUSTER_AUTHORIZATION_FAILED otherwise) and the filter of DescribeAcls and DeleteAcls built
//! from a request's fields.
//!
//! Must never: touch the store (the handlers call the security store).

use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::StrBytes;

use super::super::error_code;
use crate::context::Ctx;
use crate::security::acl::binding::AclFilter;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// Kafka's message when no authorizer is configured.
pub(crate) const NO_AUTHORIZER_MESSAGE: &str = "No Authorizer is configured.";

/// Why an admin request is refused as a whole: the code and message every result carries.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub(crate) code: i16,
    pub(crate) message: String,
}

/// Refuses an ACL API call without an authorizer, or whose principal may not perform
/// `operation` on the cluster.
pub(crate) fn acl_admin(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    operation: Operation,
) -> Result<(), Refusal> {
    if ctx.acl.is_none() {
        return Err(Refusal {
            code: error_code::SECURITY_DISABLED,
            message: NO_AUTHORIZER_MESSAGE.to_owned(),
        });
    }
    cluster_operation(ctx, session, header, operation)
}

/// Refuses a call whose principal may not perform `operation` on the cluster.
pub(crate) fn cluster_operation(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    operation: Operation,
) -> Result<(), Refusal> {
    if ctx
        .access(session, header.request_api_key)
        .allows_cluster(operation)
    {
        Ok(())
    } else {
        Err(Refusal {
            code: error_code::CLUSTER_AUTHORIZATION_FAILED,
            message: "Cluster authorization failed.".to_owned(),
        })
    }
}

/// The filter of a DescribeAcls request or a DeleteAcls filter.
pub(crate) fn acl_filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    AclFilter {
        resource_type,
        name: name.map(ToString::to_string),
        pattern_type,
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation,
        permission,
    }
}
