//! The quotas' section of `/metrics`, per quota entity: each configured quota, and each sensor's
//! measured rate and the throttles it handed out (Kafka's per-user/client-id `byte-rate`,
//! `request-time` and `throttle-time` sensors). Registered in `crate::metrics` at start.
//!
//! Must never: hold the sensors' lock beyond one pass over them.

use std::sync::Arc;

use super::entity::{resolve, EntityName, QuotaConfigs, QuotaEntity, SensorTags};
use super::sensors::SensorFigures;
use super::ClientQuotas;
use crate::metrics::{rounded_gauge, Exposition, MetricsSection};

/// The section, rendered from the quotas at each scrape.
pub(crate) struct QuotaMetrics(pub(crate) Arc<ClientQuotas>);

/// A label value as the text format wants it: backslash, quote and newline escaped (user names
/// and client ids are the client's to choose).
fn label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn entity_part(part: &Option<EntityName>) -> String {
    match part {
        None => String::new(),
        Some(EntityName::Default) => "<default>".to_owned(),
        Some(EntityName::Named(name)) => label(name),
    }
}

fn entity_labels(entity: &QuotaEntity) -> (String, String) {
    (entity_part(&entity.user), entity_part(&entity.client_id))
}

impl MetricsSection for QuotaMetrics {
    fn render(&self, out: &mut Exposition) {
        let configs = self.0.configs();
        render_configs(&configs, out);
        render_sensors(&self.0, &configs, out);
    }
}

/// Each configured quota.
fn render_configs(configs: &QuotaConfigs, out: &mut Exposition) {
    let configured = configs.iter().flat_map(|(entity, keys)| {
        let (user, client_id) = entity_labels(entity);
        keys.iter().map(move |(key, value)| {
            (
                [user.clone(), client_id.clone(), key.name().to_owned()],
                rounded_gauge(*value),
            )
        })
    });
    out.gauges_by_labels(
        "skiff_client_quota",
        "Client quotas in force on this broker, per entity (user and client_id: <default> for a default, empty when the entity has no such part) and key (bytes/s, percent of a core, partitions/s).",
        &["user", "client_id", "key"],
        configured,
    );
}

/// Each sensor's rate and throttles, after dropping the idle ones.
fn render_sensors(quotas: &ClientQuotas, configs: &QuotaConfigs, out: &mut Exposition) {
    let now_ms = quotas.now_ms();
    let (sensor_count, figures) = match quotas.sensors.lock() {
        Ok(mut sensors) => {
            sensors.expire(now_ms);
            let quota_of = |key, tags: &SensorTags| {
                resolve(configs, key, &tags.user, &tags.client_id).map_or(0.0, |(_, quota)| quota)
            };
            (sensors.len(), sensors.figures(quota_of, now_ms))
        }
        Err(_) => (0, Vec::new()),
    };
    out.gauge(
        "skiff_client_quota_sensors",
        "Per-entity quota sensors kept (bounded; idle ones expire after an hour).",
        i64::try_from(sensor_count).unwrap_or(i64::MAX),
    );
    let labelled = |value: fn(&SensorFigures) -> i64| {
        figures
            .iter()
            .map(|figure| {
                let labels = [
                    label(&figure.tags.user),
                    label(&figure.tags.client_id),
                    figure.key.name().to_owned(),
                ];
                (labels, value(figure))
            })
            .collect::<Vec<_>>()
    };
    let labels = &["user", "client_id", "key"];
    out.gauges_by_labels(
        "skiff_client_quota_measured",
        "Measured rate of each quota sensor over the quota windows (bytes/s, percent of a core; for controller_mutation_rate the token balance in partitions). user and client_id are the tags Kafka gives the sensor: empty where the matched quota does not tell them apart.",
        labels,
        labelled(|figure| rounded_gauge(figure.value)),
    );
    out.gauges_by_labels(
        "skiff_client_quota_throttle_time_ms",
        "Throttle milliseconds handed out by each quota sensor since it was made.",
        labels,
        labelled(|figure| i64::try_from(figure.throttle_ms_total).unwrap_or(i64::MAX)),
    );
    out.gauges_by_labels(
        "skiff_client_quota_throttled_requests",
        "Requests each quota sensor throttled since it was made.",
        labels,
        labelled(|figure| i64::try_from(figure.throttles).unwrap_or(i64::MAX)),
    );
}
