//! DeleteAcls: Alter on the cluster (every filter CLUSTER_AUTHORIZATION_FAILED otherwise); each
//! filter is checked as Kafka checks it (INVALID_REQUEST), and the stored ACLs the valid ones
//! match are deleted from the metadata store together, each listed under the first filter that
//! matched it, as Kafka lists them. Without an authorizer: SECURITY_DISABLED.
//!
//! Must never: list an ACL as deleted that the store did not delete (REQUEST_TIMED_OUT then).

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::common::security_admin::{self, acl_filter};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let failed = |code: i16, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if let Err(refusal) = security_admin::acl_admin(ctx, session, header, Operation::Alter) {
        let results = request
            .filters
            .iter()
            .map(|_| failed(refusal.code, refusal.message.clone()))
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let filters: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            let filter = acl_filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            );
            filter.validate().map(|()| filter)
        })
        .collect();
    let valid: Vec<_> = filters.iter().map(|f| f.as_ref().ok().cloned()).collect();
    let deleted = ctx.security.delete_acls(&valid).await;
    let results = filters
        .into_iter()
        .enumerate()
        .map(|(index, filter)| match (filter, &deleted) {
            (Err(error), _) => failed(error_code::INVALID_REQUEST, error.to_string()),
            (Ok(_), Err(error)) => failed(error_code::REQUEST_TIMED_OUT, error.to_string()),
            (Ok(_), Ok(deleted)) => {
                let matching = deleted
                    .get(index)
                    .into_iter()
                    .flatten()
                    .map(|acl| {
                        DeleteAclsMatchingAcl::default()
                            .with_error_code(error_code::NONE)
                            .with_resource_type(acl.resource_type)
                            .with_resource_name(StrBytes::from_string(acl.name.clone()))
                            .with_pattern_type(acl.pattern_type)
                            .with_principal(StrBytes::from_string(acl.principal.clone()))
                            .with_host(StrBytes::from_string(acl.host.clone()))
                            .with_operation(acl.operation)
                            .with_permission_type(acl.permission)
                    })
                    .collect();
                DeleteAclsFilterResult::default()
                    .with_error_code(error_code::NONE)
                    .with_matching_acls(matching)
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
