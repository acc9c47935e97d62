//! The status page of the operator endpoint: `GET /` is a static page (HTML and a small script,
//! compiled in from `status.html`) that polls `GET /status.json` every few seconds, and this
//! module builds that JSON: the brokers of this broker's cluster image (state, rack, load), the
//! controller, brokers seen lately and gone now, partitions offline or under-replicated (counted
//! over the image, the first [`STATUS_PARTITIONS_LISTED_MAX`] listed), the bundles with their
//! owners and the controller's last shedding cycle (what `GET /placement/bundles` serves, the
//! first [`STATUS_BUNDLES_LISTED_MAX`] listed), this broker's own figures picked out of its
//! Prometheus text ([`LOCAL_FIGURES`]), and a ring of recent load samples per broker
//! ([`LOAD_HISTORY_SAMPLES`], one per [`LOAD_SAMPLE_INTERVAL_MS`]) for the page's plot.
//!
//! Cost per request: one pass over the image's brokers, partitions and bundles under its read
//! lock (what `/metrics` and `/placement/bundles` already do), and an answer of bounded size:
//! brokers × ~300 bytes + [`STATUS_PARTITIONS_LISTED_MAX`] × ~150 bytes +
//! [`STATUS_BUNDLES_LISTED_MAX`] × ~500 bytes + [`LOAD_HISTORY_SAMPLES`] × brokers × ~30 bytes.
//!
//! Must never: change anything (no write actions, GET only), keep per-client state, or hold
//! the image's lock while writing to a socket.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use skiff_cluster::image::Versioned;
use skiff_cluster::records::{BrokerState, TopicRecord, NO_LEADER};

use crate::config::Config;
use crate::context::Ctx;
use crate::partition::topic_config::TopicConfig;

/// The page itself: HTML, style and script, no framework, nothing fetched from elsewhere.
pub(crate) const STATUS_PAGE_HTML: &str = include_str!("status.html");
/// Load samples kept per broker for the plot: ten minutes at one sample per report interval.
pub const LOAD_HISTORY_SAMPLES: usize = 120;
/// How often the load ring takes a sample: the shortest interval between two load reports.
pub const LOAD_SAMPLE_INTERVAL_MS: u64 = skiff_cluster::load::LOAD_REPORT_INTERVAL_MS_MIN;
/// Most problem partitions listed by name (all are counted).
pub const STATUS_PARTITIONS_LISTED_MAX: usize = 50;
/// Most bundles listed (all are counted).
pub const STATUS_BUNDLES_LISTED_MAX: usize = 200;
/// This broker's figures the page shows, by Prometheus family (unlabelled samples only).
pub const LOCAL_FIGURES: &[&str] = &[
    "skiff_connections",
    "skiff_connections_refused_per_ip_total",
    "skiff_connections_refused_full_total",
    "skiff_connections_evicted_total",
    "skiff_partitions_led",
    "skiff_partitions_under_replicated",
    "skiff_partitions_under_min_isr",
    "skiff_replicas_offline",
    "skiff_replica_max_lag",
    "skiff_cluster_session_alive",
    "skiff_converted_bytes_in_flight",
    "skiff_converted_bytes_in_flight_peak",
    "skiff_down_conversions_total",
    "skiff_down_converted_records_total",
    "skiff_down_conversion_temporary_bytes_total",
];

/// One sample of every registered broker's load (bytes in plus replication bytes in, per
/// second) as its last load report in the image says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSample {
    /// When the sample was taken, Unix milliseconds.
    pub at_ms: u64,
    /// Load by broker id; a registered broker without a report counts 0.
    pub loads: BTreeMap<i32, f64>,
}

/// The last [`LOAD_HISTORY_SAMPLES`] load samples, oldest first.
#[derive(Debug, Default)]
pub struct LoadHistory {
    samples: VecDeque<LoadSample>,
}

impl LoadHistory {
    /// Adds a sample, dropping the oldest beyond [`LOAD_HISTORY_SAMPLES`].
    pub fn record(&mut self, sample: LoadSample) {
        if self.samples.len() == LOAD_HISTORY_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = &LoadSample> {
        self.samples.iter()
    }

    /// Brokers in some sample of the ring that are not in `registered`: seen lately, gone now.
    pub fn gone(&self, registered: &BTreeSet<i32>) -> BTreeSet<i32> {
        self.samples
            .iter()
            .flat_map(|sample| sample.loads.keys())
            .filter(|id| !registered.contains(id))
            .copied()
            .collect()
    }
}

/// The unlabelled samples of `families` in Prometheus text, by family.
pub fn pick_figures(text: &str, families: &[&str]) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (name, value) = (parts.next()?, parts.next()?);
            families
                .contains(&name)
                .then(|| Some((name.to_owned(), value.parse().ok()?)))?
        })
        .collect()
}

fn state_name(state: BrokerState) -> &'static str {
    match state {
        BrokerState::Running => "running",
        BrokerState::ShuttingDown => "shutting down",
    }
}

/// Every registered broker's load from the image, now.
fn load_sample(ctx: &Ctx) -> Option<LoadSample> {
    let loads = ctx.cluster.with_image(|image| {
        image
            .brokers()
            .keys()
            .map(|id| {
                let load = image
                    .loads()
                    .get(id)
                    .map_or(0.0, |record| record.value.traffic.load_bytes_per_second());
                (*id, load)
            })
            .collect()
    })?;
    let at_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
    Some(LoadSample { at_ms, loads })
}

/// Fills `history` every [`LOAD_SAMPLE_INTERVAL_MS`] until the task is dropped.
pub(crate) async fn sample_loads(ctx: &Ctx, history: &Mutex<LoadHistory>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(LOAD_SAMPLE_INTERVAL_MS));
    loop {
        ticks.tick().await;
        if let (Some(sample), Ok(mut history)) = (load_sample(ctx), history.lock()) {
            history.record(sample);
        }
    }
}

/// The brokers and partitions part of the snapshot, read from the image under one lock.
fn image_part(ctx: &Ctx) -> Option<(Vec<Value>, Value, BTreeSet<i32>)> {
    let this = ctx.cluster.node_id();
    let fenced = !ctx.cluster.may_lead();
    ctx.cluster.with_image(|image| {
        let mut led: BTreeMap<i32, usize> = BTreeMap::new();
        let (mut total, mut offline, mut under_replicated) = (0usize, 0usize, 0usize);
        let mut under_min_isr = 0usize;
        let mut listed = Vec::new();
        let min_isr = min_insync_replicas_by_topic(&ctx.topics.broker_config(), image.topics());
        for (topic, partition, state) in image.all_partitions() {
            let state = &state.value;
            total += 1;
            *led.entry(state.leader).or_default() += 1;
            let topic_min_isr = min_isr.get(topic).copied().unwrap_or(1);
            let problem = if state.leader == NO_LEADER || !image.is_live(state.leader) {
                offline += 1;
                "offline"
            } else if state.isr.len() < topic_min_isr {
                under_min_isr += 1;
                under_replicated += 1;
                "under min ISR"
            } else if state.isr.len() < state.replicas.len() {
                under_replicated += 1;
                "under-replicated"
            } else {
                continue;
            };
            if listed.len() < STATUS_PARTITIONS_LISTED_MAX {
                listed.push(
                    json!({"topic": topic, "partition": partition, "problem": problem,
                    "leader": state.leader, "isr": state.isr, "replicas": state.replicas}),
                );
            }
        }
        let brokers = image
            .brokers()
            .values()
            .map(|registration| {
                let r = &registration.value;
                let load = image.loads().get(&r.node_id).map(|l| &l.value);
                let state = if r.node_id == this && fenced {
                    "fenced"
                } else {
                    state_name(r.state)
                };
                json!({"id": r.node_id, "rack": r.rack, "state": state,
                    "controller": image.controller().map(|(id, _)| id) == Some(r.node_id),
                    "partitions_led": led.get(&r.node_id).copied().unwrap_or(0),
                    "load_bytes_per_second": load.map(|l| l.traffic.load_bytes_per_second()),
                    "bytes_out_per_second": load.map(|l| l.traffic.bytes_out_per_second),
                    "load_sample_ms": load.map(|l| l.sample_ms)})
            })
            .collect();
        let partitions = json!({"total": total, "offline": offline,
            "under_replicated": under_replicated, "under_min_isr": under_min_isr,
            "listed": listed});
        (
            brokers,
            partitions,
            image.brokers().keys().copied().collect(),
        )
    })
}

/// Each topic's effective `min.insync.replicas`: its override in the topic record, else the
/// broker default (a topic whose overrides do not resolve counts with the default).
fn min_insync_replicas_by_topic(
    config: &Config,
    topics: &BTreeMap<String, Versioned<TopicRecord>>,
) -> BTreeMap<String, usize> {
    let default = usize::try_from(config.min_insync_replicas).unwrap_or(1);
    topics
        .iter()
        .map(|(name, record)| {
            let resolved = TopicConfig::resolve(config, &record.value.configs)
                .ok()
                .and_then(|topic| usize::try_from(topic.min_insync_replicas).ok());
            (name.clone(), resolved.unwrap_or(default))
        })
        .collect()
}

/// The bundles as `GET /placement/bundles` shows them, the first [`STATUS_BUNDLES_LISTED_MAX`].
fn bundles_part(ctx: &Ctx) -> Value {
    let Some(view) = ctx.cluster.bundles_view() else {
        return Value::Null;
    };
    let count = view.bundles.len();
    let listed: Vec<_> = view
        .bundles
        .iter()
        .take(STATUS_BUNDLES_LISTED_MAX)
        .map(|b| {
            json!({"name": b.name, "owner": b.owner, "state": b.state, "target": b.target,
            "load": b.load})
        })
        .collect();
    json!({"count": count, "listed": listed, "cycle": view.cycle})
}

/// The snapshot `GET /status.json` answers; `prometheus` is this broker's `/metrics` text.
pub(crate) fn snapshot(ctx: &Ctx, prometheus: &str, history: &Mutex<LoadHistory>) -> Value {
    let (brokers, partitions, registered) = image_part(ctx).unwrap_or_default();
    let (gone, samples) = history
        .lock()
        .map(|h| {
            (
                h.gone(&registered),
                h.samples().cloned().collect::<Vec<_>>(),
            )
        })
        .unwrap_or_default();
    json!({
        "node_id": ctx.cluster.node_id(),
        "cluster_id": ctx.cluster.cluster_id(),
        "controller": ctx.cluster.controller_id(),
        "now_ms": crate::clock::now_ms(),
        "brokers": brokers,
        "gone": gone,
        "partitions": partitions,
        "bundles": bundles_part(ctx),
        "local": pick_figures(prometheus, LOCAL_FIGURES),
        "load_history": samples,
        "load_sample_interval_ms": LOAD_SAMPLE_INTERVAL_MS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, loads: &[(i32, f64)]) -> LoadSample {
        LoadSample {
            at_ms,
            loads: loads.iter().copied().collect(),
        }
    }

    #[test]
    fn the_ring_keeps_the_last_samples_and_names_brokers_gone() {
        let mut history = LoadHistory::default();
        for at in 0..(LOAD_HISTORY_SAMPLES as u64 + 5) {
            history.record(sample(at, &[(0, 1.0), (1, 2.0)]));
        }
        assert_eq!(history.samples().count(), LOAD_HISTORY_SAMPLES);
        assert_eq!(history.samples().next().unwrap().at_ms, 5);
        history.record(sample(999, &[(0, 1.0)]));
        assert_eq!(history.gone(&[0].into()), [1].into());
        assert!(history.gone(&[0, 1].into()).is_empty());
    }

    #[test]
    fn figures_are_picked_by_family_without_labels() {
        let text = "# HELP skiff_connections x\n# TYPE skiff_connections gauge\n\
                    skiff_connections 3\nskiff_other 4\nskiff_partitions_led{broker=\"1\"} 7\n\
                    skiff_partitions_led 2\n";
        let figures = pick_figures(text, &["skiff_connections", "skiff_partitions_led"]);
        assert_eq!(figures.len(), 2);
        assert_eq!(figures["skiff_connections"], 3.0);
        assert_eq!(figures["skiff_partitions_led"], 2.0);
    }

    #[test]
    fn the_page_polls_the_snapshot_and_writes_nothing() {
        assert!(STATUS_PAGE_HTML.contains("status.json"));
        for verb in ["POST", "PUT", "DELETE"] {
            assert!(!STATUS_PAGE_HTML.contains(verb), "{verb}");
        }
    }
    #[test]
    fn min_insync_replicas_is_the_topic_override_or_the_broker_default() {
        let config = Config {
            min_insync_replicas: 2,
            ..Config::default()
        };
        let record = |configs: &[(&str, &str)]| Versioned {
            value: TopicRecord {
                topic_id: "00".repeat(16),
                state: skiff_cluster::records::TopicState::Ready,
                replicas: vec![vec![1, 2, 3]],
                configs: configs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                author: 1,
                author_epoch: 1,
            },
            create_revision: 1,
            mod_revision: 1,
            lease: 0,
        };
        let topics = BTreeMap::from([
            ("plain".to_owned(), record(&[])),
            ("strict".to_owned(), record(&[("min.insync.replicas", "3")])),
        ]);
        let by_topic = min_insync_replicas_by_topic(&config, &topics);
        assert_eq!(by_topic.get("plain"), Some(&2));
        assert_eq!(by_topic.get("strict"), Some(&3));
    }
}
