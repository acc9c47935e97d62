//! Client quotas, as Apache Kafka enforces them since KIP-219: `producer_byte_rate`,
//! `consumer_byte_rate`, `request_percentage` and `controller_mutation_rate` for users, client
//! ids, their combinations and defaults ([`entity`], Kafka's precedence), measured per broker over
//! `quota.window.num` windows of `quota.window.size.seconds` ([`rate`]) in bounded per-entity
//! sensors ([`sensors`]), configured in the metadata store and applied from its watch ([`store`]).
//!
//! [`ClientQuotas`] answers the request path: a request over its quota is answered at once with
//! its `throttle_time_ms`, and its connection then reads nothing for that long (`crate::net`);
//! a throttled Fetch carries no records. `request_percentage` is measured as the time the broker's
//! threads spend polling the client's requests (decode, handler, encode; not the time a request
//! waits for data, replication or the disk), in percent of one core: see
//! docs/operating/quotas.md.
//!
//! Must never: block the request path on the store (quotas come from the watch), or hold its lock
//! across an await.

pub(crate) mod entity;
mod figures;
pub(crate) mod rate;
pub(crate) mod sensors;
pub(crate) mod store;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

pub(crate) use entity::SensorTags;
use entity::{resolve, QuotaConfigs, QuotaKey};
use rate::Windows;
use sensors::SensorSet;

pub(crate) use figures::QuotaMetrics;

/// Who a request is from, as quotas see it: the principal's name (`ANONYMOUS` on an
/// unauthenticated listener, as in Kafka) and the request header's client id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client<'a> {
    pub(crate) user: &'a str,
    pub(crate) client_id: &'a str,
}

/// What a strict controller-mutation check answered (CreateTopics v6+, CreatePartitions v3+,
/// DeleteTopics v5+, Kafka's `StrictControllerMutationQuota`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// Within the quota (or no quota): go ahead, then [`ClientQuotas::record_mutation`].
    Allowed,
    /// Over it: refuse with THROTTLING_QUOTA_EXCEEDED and this throttle.
    Exceeded { throttle_ms: u64 },
}

/// The broker's quota state: the configs last applied from the store and the sensors.
#[derive(Debug)]
pub(crate) struct ClientQuotas {
    windows: Windows,
    configs: RwLock<Arc<QuotaConfigs>>,
    /// Whether any quota is configured: read by every request, so a broker without quotas pays
    /// one atomic load per request instead of the configs' lock and the request's poll timing.
    active: AtomicBool,
    sensors: Mutex<SensorSet>,
    started: std::time::Instant,
}

impl ClientQuotas {
    /// No quotas yet, measuring over `window_count` windows of `window_seconds`.
    pub(crate) fn new(
        window_count: usize,
        window_seconds: u64,
        started: std::time::Instant,
    ) -> Self {
        let windows = Windows {
            count: window_count.max(2),
            window_ms: i64::try_from(window_seconds.saturating_mul(1000))
                .unwrap_or(i64::MAX)
                .max(1),
        };
        Self {
            windows,
            configs: RwLock::new(Arc::new(QuotaConfigs::new())),
            active: AtomicBool::new(false),
            sensors: Mutex::new(SensorSet::new(windows, sensors::SENSORS_MAX)),
            started,
        }
    }

    /// Milliseconds on the broker's monotonic clock since the quotas were made.
    pub(crate) fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Replaces the configs (from the store's watch); sensors keep their rates.
    pub(crate) fn apply(&self, configs: QuotaConfigs) {
        let active = !configs.is_empty();
        if let Ok(mut current) = self.configs.write() {
            *current = Arc::new(configs);
        }
        self.active.store(active, Ordering::Release);
    }

    /// Whether any quota is configured (else nothing is recorded or throttled).
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The configs in force.
    pub(crate) fn configs(&self) -> Arc<QuotaConfigs> {
        self.configs
            .read()
            .map(|configs| Arc::clone(&configs))
            .unwrap_or_default()
    }

    fn quota(&self, key: QuotaKey, client: Client<'_>) -> Option<(SensorTags, f64)> {
        if !self.active() {
            return None;
        }
        let configs = self.configs.read().ok()?;
        resolve(&configs, key, client.user, client.client_id)
    }

    /// Records `value` (bytes, or percent-seconds of a core) on `client`'s sensor of `key` and
    /// answers the throttle in milliseconds; 0 when no quota applies or the client is within it.
    pub(crate) fn record(&self, key: QuotaKey, client: Client<'_>, value: f64, now_ms: i64) -> u64 {
        let Some((tags, quota)) = self.quota(key, client) else {
            return 0;
        };
        let Ok(mut sensors) = self.sensors.lock() else {
            return 0;
        };
        let throttle = sensors.record(key, &tags, quota, value, now_ms);
        if key == QuotaKey::RequestPercentage {
            // Kafka bounds a request-time throttle by one window (ClientRequestQuotaManager).
            return throttle.min(u64::try_from(self.windows.window_ms).unwrap_or(u64::MAX));
        }
        throttle
    }

    /// Takes back bytes recorded for a Fetch that is answered without them.
    pub(crate) fn unrecord(&self, key: QuotaKey, client: Client<'_>, value: f64, now_ms: i64) {
        let Some((tags, _)) = self.quota(key, client) else {
            return;
        };
        if let Ok(mut sensors) = self.sensors.lock() {
            sensors.unrecord(key, &tags, value, now_ms);
        }
    }

    /// Time spent on a request, as `request_percentage` counts it: `busy` of one core over the
    /// windows (percent-seconds).
    pub(crate) fn record_request_time(
        &self,
        client: Client<'_>,
        busy: std::time::Duration,
        now_ms: i64,
    ) -> u64 {
        let percent_seconds = busy.as_secs_f64() * 100.0;
        self.record(QuotaKey::RequestPercentage, client, percent_seconds, now_ms)
    }

    /// A strict mutation check, before anything is created or deleted.
    pub(crate) fn check_mutation(&self, client: Client<'_>, now_ms: i64) -> Mutation {
        let Some((tags, quota)) = self.quota(QuotaKey::ControllerMutationRate, client) else {
            return Mutation::Allowed;
        };
        let Ok(mut sensors) = self.sensors.lock() else {
            return Mutation::Allowed;
        };
        match sensors.mutation_throttle(&tags, quota, now_ms) {
            0 => Mutation::Allowed,
            throttle_ms => Mutation::Exceeded { throttle_ms },
        }
    }

    /// Records `partitions` created, added or deleted and answers the throttle after them.
    pub(crate) fn record_mutation(&self, client: Client<'_>, partitions: f64, now_ms: i64) -> u64 {
        self.record(QuotaKey::ControllerMutationRate, client, partitions, now_ms)
    }
}

/// Makes the broker's quotas from `quota.window.num` and `quota.window.size.seconds`, registers
/// their `/metrics` section, and starts following the store.
pub(crate) fn start(
    config: &crate::config::Config,
    cluster: &crate::cluster::Cluster,
    metrics: &crate::metrics::Metrics,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Arc<ClientQuotas> {
    let quotas = Arc::new(ClientQuotas::new(
        config.quota_window_num,
        config.quota_window_size_seconds,
        crate::clock::instant(),
    ));
    metrics.register(Arc::new(QuotaMetrics(quotas.clone())));
    tokio::spawn(store::follow(
        cluster.store().clone(),
        cluster.store_root().to_owned(),
        quotas.clone(),
        shutdown,
    ));
    quotas
}

#[cfg(test)]
mod tests {
    use super::entity::{EntityName, QuotaEntity};
    use super::*;

    #[test]
    fn a_client_without_quota_is_never_throttled_and_a_quota_applies_from_the_next_request() {
        let quotas = ClientQuotas::new(11, 1, crate::clock::instant());
        let client = Client {
            user: "ANONYMOUS",
            client_id: "greedy",
        };
        assert_eq!(
            quotas.record(QuotaKey::ProducerByteRate, client, 1e12, 0),
            0
        );
        let mut configs = QuotaConfigs::new();
        configs.insert(
            QuotaEntity {
                user: None,
                client_id: Some(EntityName::Named("greedy".into())),
            },
            [(QuotaKey::ProducerByteRate, 1000.0)].into(),
        );
        quotas.apply(configs);
        assert!(quotas.record(QuotaKey::ProducerByteRate, client, 1e6, 0) > 0);
        let other = Client {
            user: "ANONYMOUS",
            client_id: "polite",
        };
        assert_eq!(quotas.record(QuotaKey::ProducerByteRate, other, 1e6, 0), 0);
    }
}
