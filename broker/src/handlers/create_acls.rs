//! CreateAcls: Alter on the cluster (every creation CLUSTER_AUTHORIZATION_FAILED otherwise), then
//! each ACL is checked as Kafka's `AclControlManager` checks it (INVALID_REQUEST with Kafka's
//! message), and the valid ones are stored in the metadata store together; the answer waits until
//! this broker's authorizer has them. Without an authorizer: SECURITY_DISABLED, as Kafka.
//!
//! Must never: change the authorizer's set itself (the store's watch does, on every broker), or
//! answer success for an ACL the store did not take (REQUEST_TIMED_OUT then).

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::security::AclRecord;

use super::common::security_admin::{self, Refusal};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::binding::validate_new;
use crate::security::acl::Operation;
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let result = |code: i16, message: Option<String>| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    let every = |refusal: Refusal| {
        let results = request
            .creations
            .iter()
            .map(|_| result(refusal.code, Some(refusal.message.clone())))
            .collect();
        CreateAclsResponse::default().with_results(results)
    };
    if let Err(refusal) = security_admin::acl_admin(ctx, session, header, Operation::Alter) {
        return every(refusal);
    }
    let checked: Vec<Result<AclRecord, String>> = request
        .creations
        .iter()
        .map(|creation| {
            let record = AclRecord {
                resource_type: creation.resource_type,
                name: creation.resource_name.to_string(),
                pattern_type: creation.resource_pattern_type,
                principal: creation.principal.to_string(),
                host: creation.host.to_string(),
                operation: creation.operation,
                permission: creation.permission_type,
            };
            validate_new(&record)
                .map(|_| record)
                .map_err(|error| error.to_string())
        })
        .collect();
    let valid: Vec<AclRecord> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        ctx.security.create_acls(&valid).await
    };
    let results = checked
        .into_iter()
        .map(|checked| match (checked, &stored) {
            (Err(message), _) => result(error_code::INVALID_REQUEST, Some(message)),
            (Ok(_), Ok(())) => result(error_code::NONE, None),
            (Ok(_), Err(error)) => result(error_code::REQUEST_TIMED_OUT, Some(error.to_string())),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}
