//! DescribeClientQuotas (v0–1): the quotas stored for the entities a filter matches, read from
//! the metadata store itself (the one source of truth; REQUEST_TIMED_OUT when it is out of reach).
//!
//! As Kafka's `ClientQuotasImage.describe`: each filter component names an entity type (`user`,
//! `client-id`, `ip`) at most once, with match type 0 (exactly this name), 1 (the default
//! entity) or 2 (any name of that type, the default included); a non-strict filter also matches
//! entities with more parts than it names, a strict one only entities with exactly those parts.
//! Describe on the cluster is needed (DescribeConfigs; CLUSTER_AUTHORIZATION_FAILED).
//!
//! Must never: describe anything the filter does not match, or answer from a stale copy.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::quota::entity::{EntityName, QuotaEntity};
use crate::quota::store;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// Kafka's entity type names.
const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

/// A filter, checked: exact names (`None` for the default entity) and types matched by any name.
#[derive(Debug, Default, PartialEq)]
struct Filter {
    exact: BTreeMap<String, Option<String>>,
    any: Vec<String>,
    strict: bool,
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows_cluster(Operation::DescribeConfigs) {
        return failed(
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.".to_owned(),
        );
    }
    let filter = match checked_filter(&request) {
        Ok(filter) => filter,
        Err((code, message)) => return failed(code, message),
    };
    let configs = match store::read_all(ctx.cluster.store(), ctx.cluster.store_root()).await {
        Ok(configs) => configs,
        Err(error) => return failed(error_code::REQUEST_TIMED_OUT, error.to_string()),
    };
    let entries = configs
        .iter()
        .filter(|(entity, _)| matches(&filter, entity))
        .map(|(entity, quotas)| {
            EntryData::default()
                .with_entity(entity_data(entity))
                .with_values(
                    quotas
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(StrBytes::from_static_str(key.name()))
                                .with_value(*value)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default()
        .with_error_code(error_code::NONE)
        .with_entries(Some(entries))
}

fn failed(code: i16, message: String) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message)))
        .with_entries(None)
}

/// The filter of a request, or Kafka's error for it.
fn checked_filter(request: &DescribeClientQuotasRequest) -> Result<Filter, (i16, String)> {
    let invalid = |message: String| (error_code::INVALID_REQUEST, message);
    let mut filter = Filter {
        strict: request.strict,
        ..Filter::default()
    };
    for component in &request.components {
        let entity_type = component.entity_type.to_string();
        if entity_type.is_empty() {
            return Err(invalid("Invalid empty entity type.".to_owned()));
        }
        if filter.exact.contains_key(&entity_type) || filter.any.contains(&entity_type) {
            return Err(invalid(format!(
                "Entity type {entity_type} cannot appear more than once in the filter."
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err((
                error_code::UNSUPPORTED_VERSION,
                format!("Unsupported entity type {entity_type}"),
            ));
        }
        let name = component._match.as_ref().map(|name| name.to_string());
        match (component.match_type, name) {
            (0, Some(name)) => {
                filter.exact.insert(entity_type, Some(name));
            }
            (0, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".to_owned(),
                ))
            }
            (1, None) => {
                filter.exact.insert(entity_type, None);
            }
            (1, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .to_owned(),
                ))
            }
            (2, None) => filter.any.push(entity_type),
            (2, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .to_owned(),
                ))
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    let names =
        |kind: &str| filter.exact.contains_key(kind) || filter.any.iter().any(|t| t == kind);
    if names(IP) && (names(USER) || names(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.".to_owned(),
        ));
    }
    Ok(filter)
}

/// An entity's parts by Kafka's type names (`None` for a default part).
fn parts(entity: &QuotaEntity) -> BTreeMap<&'static str, Option<String>> {
    let mut parts = BTreeMap::new();
    let name = |part: &EntityName| part.wire().map(str::to_owned);
    if let Some(user) = &entity.user {
        parts.insert(USER, name(user));
    }
    if let Some(client_id) = &entity.client_id {
        parts.insert(CLIENT_ID, name(client_id));
    }
    parts
}

fn matches(filter: &Filter, entity: &QuotaEntity) -> bool {
    let parts = parts(entity);
    if filter.strict && parts.len() != filter.exact.len() + filter.any.len() {
        return false;
    }
    filter
        .exact
        .iter()
        .all(|(kind, name)| parts.get(kind.as_str()) == Some(name))
        && filter
            .any
            .iter()
            .all(|kind| parts.contains_key(kind.as_str()))
}

fn entity_data(entity: &QuotaEntity) -> Vec<EntityData> {
    parts(entity)
        .into_iter()
        .map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(StrBytes::from_static_str(kind))
                .with_entity_name(name.map(StrBytes::from_string))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;

    fn component(kind: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(kind.to_owned()))
            .with_match_type(match_type)
            .with_match(name.map(|name| StrBytes::from_string(name.to_owned())))
    }

    fn entity(user: Option<EntityName>, client_id: Option<EntityName>) -> QuotaEntity {
        QuotaEntity { user, client_id }
    }

    #[test]
    fn filters_match_as_kafkas() {
        let alice = Some(EntityName::Named("alice".into()));
        let app = Some(EntityName::Named("app".into()));
        let default = Some(EntityName::Default);
        let request = |components, strict| {
            DescribeClientQuotasRequest::default()
                .with_components(components)
                .with_strict(strict)
        };
        // user=alice, not strict: alice alone and alice with any client.
        let filter =
            checked_filter(&request(vec![component(USER, 0, Some("alice"))], false)).unwrap();
        assert!(matches(&filter, &entity(alice.clone(), None)));
        assert!(matches(&filter, &entity(alice.clone(), app.clone())));
        assert!(!matches(&filter, &entity(default.clone(), None)));
        // Strict: alice alone.
        let filter =
            checked_filter(&request(vec![component(USER, 0, Some("alice"))], true)).unwrap();
        assert!(!matches(&filter, &entity(alice.clone(), app.clone())));
        // Any client id, strict: every client-only entity, the default included.
        let filter = checked_filter(&request(vec![component(CLIENT_ID, 2, None)], true)).unwrap();
        assert!(matches(&filter, &entity(None, default.clone())));
        assert!(matches(&filter, &entity(None, app.clone())));
        assert!(!matches(&filter, &entity(alice.clone(), app)));
        // The default user.
        let filter = checked_filter(&request(vec![component(USER, 1, None)], false)).unwrap();
        assert!(matches(&filter, &entity(default, None)));
        assert!(!matches(&filter, &entity(alice, None)));
        // No components, not strict: everything.
        assert!(checked_filter(&request(vec![], false)).is_ok());
    }

    #[test]
    fn bad_filters_get_kafkas_errors() {
        let request =
            |components| DescribeClientQuotasRequest::default().with_components(components);
        let code = |components| checked_filter(&request(components)).unwrap_err().0;
        assert_eq!(
            code(vec![component(USER, 0, None)]),
            error_code::INVALID_REQUEST
        );
        assert_eq!(
            code(vec![component(USER, 1, Some("x"))]),
            error_code::INVALID_REQUEST
        );
        assert_eq!(
            code(vec![component(USER, 3, None)]),
            error_code::INVALID_REQUEST
        );
        assert_eq!(
            code(vec![component("group", 2, None)]),
            error_code::UNSUPPORTED_VERSION
        );
        assert_eq!(
            code(vec![component(USER, 2, None), component(USER, 1, None)]),
            error_code::INVALID_REQUEST
        );
        assert_eq!(
            code(vec![component(IP, 2, None), component(USER, 2, None)]),
            error_code::INVALID_REQUEST
        );
    }
}
