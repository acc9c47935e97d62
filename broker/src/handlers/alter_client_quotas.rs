//! AlterClientQuotas (v0–1): sets and removes quotas of user, client-id and (user, client-id)
//! entities and their defaults, written to the metadata store by this broker (a compare-and-set
//! per entity) and applied by every broker from the store's watch. Each entry is answered on its
//! own: NONE once the store took it, INVALID_REQUEST with Kafka's message for a bad entity, key or
//! value, REQUEST_TIMED_OUT when the store is out of reach.
//!
//! As Kafka's `ClientQuotaControlManager`: the entity types are `user` and `client-id`, each at
//! most once, a null name being the default; the keys are `producer_byte_rate`,
//! `consumer_byte_rate` (whole numbers), `request_percentage` and `controller_mutation_rate`, each
//! greater than 0. `ip` entities (connection-rate quotas) are refused: Skiff does not enforce
//! them. Alter on the cluster's configs is needed (AlterConfigs; CLUSTER_AUTHORIZATION_FAILED).
//!
//! Must never: store a quota that is not enforced, or answer NONE before the store took it.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntryData as RequestEntry, OpData};
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::quota::entity::{EntityName, QuotaEntity, QuotaKey};
use crate::quota::store::{self, EntityChange};
use crate::security::acl::Operation;
use crate::security::session::Session;

/// The largest whole-number quota Kafka accepts (a LONG).
const LONG_QUOTA_MAX: f64 = 9.223_372_036_854_776e18;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let access = ctx.access(session, header.request_api_key);
    let allowed = access.allows_cluster(Operation::AlterConfigs);
    let mut entries = Vec::with_capacity(request.entries.len());
    for entry in &request.entries {
        let outcome = if allowed {
            alter_one(ctx, entry, request.validate_only).await
        } else {
            Err((
                error_code::CLUSTER_AUTHORIZATION_FAILED,
                "Cluster authorization failed.".to_owned(),
            ))
        };
        let (code, message) = match outcome {
            Ok(()) => (error_code::NONE, None),
            Err((code, message)) => (code, Some(StrBytes::from_string(message))),
        };
        entries.push(
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(
                    entry
                        .entity
                        .iter()
                        .map(|part| {
                            EntityData::default()
                                .with_entity_type(part.entity_type.clone())
                                .with_entity_name(part.entity_name.clone())
                        })
                        .collect(),
                ),
        );
    }
    AlterClientQuotasResponse::default().with_entries(entries)
}

async fn alter_one(
    ctx: &Ctx,
    entry: &RequestEntry,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let entity = checked_entity(entry).map_err(|message| (error_code::INVALID_REQUEST, message))?;
    let change = checked_change(&entity, &entry.ops)
        .map_err(|message| (error_code::INVALID_REQUEST, message))?;
    if validate_only {
        return Ok(());
    }
    store::alter(
        ctx.cluster.store(),
        ctx.cluster.store_root(),
        &entity,
        &change,
    )
    .await
    .map_err(|error| (error_code::REQUEST_TIMED_OUT, error.to_string()))
}

/// The entity of an entry, or Kafka's message for why it is refused.
fn checked_entity(entry: &RequestEntry) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    if entry.entity.is_empty() {
        return Err("Invalid empty client quota entity".to_owned());
    }
    for part in &entry.entity {
        let kind = part.entity_type.as_str();
        let name = match &part.entity_name {
            None => EntityName::Default,
            Some(name) if name.is_empty() => return Err(format!("Empty {kind} not supported")),
            Some(name) => EntityName::Named(name.to_string()),
        };
        let slot = match kind {
            "user" => &mut entity.user,
            "client-id" => &mut entity.client_id,
            "ip" => {
                return Err(
                    "ip quota entities (connection_creation_rate) are not supported by Skiff"
                        .to_owned(),
                )
            }
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if slot.is_some() {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            ));
        }
        *slot = Some(name);
    }
    Ok(entity)
}

/// The change an entry's operations make, or Kafka's message for why it is refused.
fn checked_change(entity: &QuotaEntity, ops: &[OpData]) -> Result<EntityChange, String> {
    let mut change = EntityChange::default();
    let mut seen = BTreeMap::new();
    for op in ops {
        let name = op.key.as_str();
        let Some(key) = QuotaKey::from_name(name) else {
            return Err(format!("Invalid configuration key {name}"));
        };
        if seen.insert(key, ()).is_some() {
            return Err(format!(
                "Duplicate quota key {name} not updating quota for this entity {entity:?}"
            ));
        }
        if op.remove {
            change.remove.push(key);
            continue;
        }
        check_value(key, op.value)?;
        change.set.insert(key, op.value);
    }
    Ok(change)
}

fn check_value(key: QuotaKey, value: f64) -> Result<(), String> {
    let name = key.name();
    if value.is_nan() || value <= 0.0 {
        return Err(format!("Quota {name} must be greater than 0"));
    }
    if key.is_whole() {
        if value > LONG_QUOTA_MAX {
            return Err(format!(
                "Proposed value for {name} is too large for a LONG."
            ));
        }
        if (value - value.round()).abs() > 1e-6 {
            return Err(format!("{name} cannot be a fractional value."));
        }
    } else if value.is_infinite() {
        return Err(format!("Quota {name} must be a finite number"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_client_quotas_request::EntityData as RequestEntity;

    fn part(kind: &str, name: Option<&str>) -> RequestEntity {
        RequestEntity::default()
            .with_entity_type(StrBytes::from_string(kind.to_owned()))
            .with_entity_name(name.map(|name| StrBytes::from_string(name.to_owned())))
    }

    fn op(key: &str, value: f64, remove: bool) -> OpData {
        OpData::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_value(value)
            .with_remove(remove)
    }

    #[test]
    fn entities_are_checked_as_kafka_checks_them() {
        let entry = |parts| RequestEntry::default().with_entity(parts);
        let ok = checked_entity(&entry(vec![
            part("user", Some("alice")),
            part("client-id", None),
        ]))
        .unwrap();
        assert_eq!(ok.user, Some(EntityName::Named("alice".into())));
        assert_eq!(ok.client_id, Some(EntityName::Default));
        for bad in [
            vec![],
            vec![part("user", Some(""))],
            vec![part("user", None), part("user", Some("a"))],
            vec![part("group", Some("g"))],
            vec![part("ip", Some("10.0.0.1"))],
        ] {
            assert!(checked_entity(&entry(bad)).is_err());
        }
    }

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        let entity = QuotaEntity {
            user: None,
            client_id: Some(EntityName::Default),
        };
        let change = checked_change(
            &entity,
            &[
                op("producer_byte_rate", 1024.0, false),
                op("request_percentage", 0.0, true),
            ],
        )
        .unwrap();
        assert_eq!(change.set[&QuotaKey::ProducerByteRate], 1024.0);
        assert_eq!(change.remove, vec![QuotaKey::RequestPercentage]);
        for bad in [
            op("producer_byte_rate", 1.5, false),
            op("consumer_byte_rate", 0.0, false),
            op("request_percentage", -1.0, false),
            op("controller_mutation_rate", f64::INFINITY, false),
            op("producer_byte_rate", 1e30, false),
            op("connection_creation_rate", 10.0, false),
        ] {
            assert!(checked_change(&entity, &[bad]).is_err());
        }
        assert!(checked_change(
            &entity,
            &[
                op("request_percentage", 50.5, false),
                op("request_percentage", 1.0, false)
            ]
        )
        .is_err());
    }
}
