//! DescribeAcls: Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), then the ACLs
//! the filter matches (Kafka's `AclBindingFilter` rules, MATCH and ANY included), grouped by
//! resource pattern as Kafka answers. Read from the metadata store, so every broker answers the
//! same right after a change; REQUEST_TIMED_OUT when the store does not answer. Without an
//! authorizer: SECURITY_DISABLED.
//!
//! Must never: answer from a partial read (the store's answer is one revision).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse, RequestHeader};
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
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refused = |code: i16, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if let Err(refusal) = security_admin::acl_admin(ctx, session, header, Operation::Describe) {
        return refused(refusal.code, refusal.message);
    }
    let filter = acl_filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    );
    if let Err(error) = filter.validate() {
        return refused(error_code::INVALID_REQUEST, error.to_string());
    }
    let stored = match ctx.security.stored_acls().await {
        Ok(stored) => stored,
        Err(error) => return refused(error_code::REQUEST_TIMED_OUT, error.to_string()),
    };
    let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in stored.into_iter().filter(|acl| filter.matches(acl)) {
        resources
            .entry((acl.resource_type, acl.name, acl.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(acl.principal))
                    .with_host(StrBytes::from_string(acl.host))
                    .with_operation(acl.operation)
                    .with_permission_type(acl.permission),
            );
    }
    let resources = resources
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default()
        .with_error_code(error_code::NONE)
        .with_resources(resources)
}
