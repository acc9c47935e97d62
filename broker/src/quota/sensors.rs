//! Per-entity quota state, bounded: one sensor per (quota key, sensor tags) that has a quota,
//! each a sampled [`Rate`] (or, for `controller_mutation_rate`, a [`TokenBucket`]) with the
//! throttle figures `/metrics` shows. Pure: time is an argument.
//!
//! Bounded as Kafka's sensors are not: at most [`SENSORS_MAX`] sensors. A sensor idle for
//! [`SENSOR_IDLE_EXPIRY_MS`] is dropped (Kafka's `InactiveSensorExpirationTimeSeconds`, one
//! hour); when the set is full of live sensors, the one idle longest makes room (its client's
//! next request starts a fresh rate: the cost of the bound, paid only past 100 000 entities).
//!
//! Must never: grow past its bound, or read a clock.

use std::collections::HashMap;

use super::entity::{QuotaKey, SensorTags};
use super::rate::{Rate, TokenBucket, Windows};

/// Most sensors kept at once, across keys: enough for 25 000 clients with all four quotas;
/// each costs about 400 bytes (11 samples, tags, figures), 40 MiB at the bound.
pub(crate) const SENSORS_MAX: usize = 100_000;
/// A sensor not used for this long is dropped (Kafka's one hour).
pub(crate) const SENSOR_IDLE_EXPIRY_MS: i64 = 3_600_000;

/// What a sensor measures with.
#[derive(Clone, Debug, PartialEq)]
enum Meter {
    Rate(Rate),
    Bucket(TokenBucket),
}

/// One sensor and its figures.
#[derive(Clone, Debug, PartialEq)]
struct Sensor {
    meter: Meter,
    last_used_ms: i64,
    /// Throttle milliseconds handed out, and how many times.
    throttle_ms_total: u64,
    throttles: u64,
}

/// What `/metrics` shows of one sensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SensorFigures {
    pub(crate) key: QuotaKey,
    pub(crate) tags: SensorTags,
    /// The measured rate (bytes/s, percent, or the bucket's balance for mutations).
    pub(crate) value: f64,
    pub(crate) throttle_ms_total: u64,
    pub(crate) throttles: u64,
}

/// Every sensor of one broker.
#[derive(Debug)]
pub(crate) struct SensorSet {
    windows: Windows,
    limit: usize,
    sensors: HashMap<(QuotaKey, SensorTags), Sensor>,
}

impl SensorSet {
    /// An empty set measuring over `windows`, holding at most `limit` sensors.
    pub(crate) fn new(windows: Windows, limit: usize) -> Self {
        Self {
            windows,
            limit: limit.max(1),
            sensors: HashMap::new(),
        }
    }

    /// How many sensors are kept.
    pub(crate) fn len(&self) -> usize {
        self.sensors.len()
    }

    fn sensor(&mut self, key: QuotaKey, tags: &SensorTags, quota: f64, now_ms: i64) -> &mut Sensor {
        let id = (key, tags.clone());
        if !self.sensors.contains_key(&id) {
            self.make_room(now_ms);
        }
        let windows = self.windows;
        let sensor = self.sensors.entry(id).or_insert_with(|| Sensor {
            meter: match key {
                QuotaKey::ControllerMutationRate => {
                    Meter::Bucket(TokenBucket::new(windows, quota, now_ms))
                }
                _ => Meter::Rate(Rate::new(windows, now_ms)),
            },
            last_used_ms: now_ms,
            throttle_ms_total: 0,
            throttles: 0,
        });
        sensor.last_used_ms = sensor.last_used_ms.max(now_ms);
        sensor
    }

    /// Drops idle sensors; if still full, the one idle longest.
    fn make_room(&mut self, now_ms: i64) {
        if self.sensors.len() < self.limit {
            return;
        }
        self.expire(now_ms);
        while self.sensors.len() >= self.limit {
            let Some(oldest) = self
                .sensors
                .iter()
                .min_by_key(|(_, sensor)| sensor.last_used_ms)
                .map(|(id, _)| id.clone())
            else {
                return;
            };
            self.sensors.remove(&oldest);
        }
    }

    /// Drops every sensor idle for [`SENSOR_IDLE_EXPIRY_MS`] or more.
    pub(crate) fn expire(&mut self, now_ms: i64) {
        self.sensors
            .retain(|_, sensor| now_ms - sensor.last_used_ms < SENSOR_IDLE_EXPIRY_MS);
    }

    /// Records `value` against `quota` and answers the throttle in milliseconds (0 within it).
    pub(crate) fn record(
        &mut self,
        key: QuotaKey,
        tags: &SensorTags,
        quota: f64,
        value: f64,
        now_ms: i64,
    ) -> u64 {
        let windows = self.windows;
        let sensor = self.sensor(key, tags, quota, now_ms);
        let throttle = match &mut sensor.meter {
            Meter::Rate(rate) => rate.record_and_throttle(windows, quota, value, now_ms),
            Meter::Bucket(bucket) => bucket.record(windows, quota, value, now_ms),
        };
        if throttle > 0 {
            sensor.throttles += 1;
            sensor.throttle_ms_total = sensor.throttle_ms_total.saturating_add(throttle);
        }
        throttle
    }

    /// Takes back a recorded `value` (a throttled Fetch sends no records, Kafka's
    /// `unrecordQuotaSensor`).
    pub(crate) fn unrecord(&mut self, key: QuotaKey, tags: &SensorTags, value: f64, now_ms: i64) {
        let windows = self.windows;
        if let Some(Sensor {
            meter: Meter::Rate(rate),
            ..
        }) = self.sensors.get_mut(&(key, tags.clone()))
        {
            rate.record(windows, -value, now_ms);
        }
    }

    /// The throttle a strict mutation quota answers before recording: positive while the bucket
    /// is overdrawn (Kafka's `StrictControllerMutationQuota` checks before it records).
    pub(crate) fn mutation_throttle(&mut self, tags: &SensorTags, quota: f64, now_ms: i64) -> u64 {
        let windows = self.windows;
        let key = QuotaKey::ControllerMutationRate;
        let sensor = self.sensor(key, tags, quota, now_ms);
        match &mut sensor.meter {
            Meter::Bucket(bucket) => bucket.throttle_ms(windows, quota, now_ms),
            Meter::Rate(_) => 0,
        }
    }

    /// The figures of every sensor, measured at `now_ms`, in tag order.
    pub(crate) fn figures(
        &mut self,
        quota_of: impl Fn(QuotaKey, &SensorTags) -> f64,
        now_ms: i64,
    ) -> Vec<SensorFigures> {
        let windows = self.windows;
        let mut figures: Vec<SensorFigures> = self
            .sensors
            .iter_mut()
            .map(|((key, tags), sensor)| SensorFigures {
                key: *key,
                tags: tags.clone(),
                value: match &mut sensor.meter {
                    Meter::Rate(rate) => rate.measure(windows, now_ms),
                    Meter::Bucket(bucket) => {
                        // The balance is what Kafka's mutation-rate metric shows.
                        let quota = quota_of(*key, tags);
                        bucket.throttle_ms(windows, quota, now_ms);
                        bucket_balance(bucket)
                    }
                },
                throttle_ms_total: sensor.throttle_ms_total,
                throttles: sensor.throttles,
            })
            .collect();
        figures.sort_by(|a, b| (a.key, &a.tags).cmp(&(b.key, &b.tags)));
        figures
    }
}

fn bucket_balance(bucket: &TokenBucket) -> f64 {
    bucket.tokens()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::rate::Windows;
    use proptest::prelude::*;

    fn tags(n: usize) -> SensorTags {
        SensorTags {
            user: format!("u{n}"),
            client_id: String::new(),
        }
    }

    proptest! {
        /// However many entities come and go, the set never holds more than its limit, and an
        /// entity idle past the expiry is gone.
        #[test]
        fn bounded_and_expiring(
            uses in proptest::collection::vec((0usize..50, 0i64..1_000_000), 1..300),
        ) {
            let mut set = SensorSet::new(Windows::KAFKA_DEFAULT, 8);
            let mut now = 0;
            for (entity, step) in uses {
                now += step;
                set.record(QuotaKey::ProducerByteRate, &tags(entity), 1000.0, 10.0, now);
                prop_assert!(set.len() <= 8);
            }
            set.expire(now + SENSOR_IDLE_EXPIRY_MS);
            prop_assert_eq!(set.len(), 0);
        }
    }

    #[test]
    fn unrecord_takes_a_fetch_back() {
        let mut set = SensorSet::new(Windows::KAFKA_DEFAULT, 8);
        let t = tags(1);
        assert!(set.record(QuotaKey::ConsumerByteRate, &t, 100.0, 5000.0, 0) > 0);
        set.unrecord(QuotaKey::ConsumerByteRate, &t, 5000.0, 0);
        assert_eq!(
            set.record(QuotaKey::ConsumerByteRate, &t, 100.0, 10.0, 0),
            0
        );
    }
}
