//! The cluster's section of `/metrics`: the glue's counters (store errors, lost sessions,
//! controller terms and writes, watch resumes, unclean elections) and what this broker's image
//! shows (brokers, partitions, offline partitions, the controller, each broker's leaderships
//! and replicas). Registered in `crate::metrics` at start ([`Cluster::register_metrics`]), with
//! the placement section ([`super::shedding`]); the image's figures are [`ImageFigures`], pure.
//!
//! Must never: hold a lock across a scrape's rendering beyond one read of the image.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use skiff_cluster::ClusterImage;

use super::{shedding, Cluster, ClusterHandle};
use crate::metrics::{Exposition, Metrics, MetricsSection};

/// Counters of the cluster glue, for `/metrics`.
#[derive(Debug, Default)]
pub(super) struct ClusterCounters {
    pub(super) store_errors: AtomicU64,
    pub(super) sessions_lost: AtomicU64,
    pub(super) controller_terms_won: AtomicU64,
    pub(super) controller_writes: AtomicU64,
    pub(super) controller_writes_refused: AtomicU64,
    pub(super) watch_resumes: AtomicU64,
    pub(super) unclean_leader_elections: AtomicU64,
}

/// What the cluster section reports of an image.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ImageFigures {
    /// Live brokers.
    pub(super) brokers: usize,
    /// The revision the image has reached.
    pub(super) revision: i64,
    /// Partition states.
    pub(super) partitions: usize,
    /// Partitions without a live leader (Kafka's OfflinePartitionsCount).
    pub(super) offline: usize,
    /// Partitions each broker leads (every live broker, 0 when it leads none).
    pub(super) led: BTreeMap<i32, i64>,
    /// Partition replicas each broker holds (every live broker too).
    pub(super) replicated: BTreeMap<i32, i64>,
}

impl ImageFigures {
    /// The figures of `image`.
    pub(super) fn of(image: &ClusterImage) -> Self {
        let mut led: BTreeMap<i32, i64> = image.brokers().keys().map(|id| (*id, 0)).collect();
        let mut replicated = led.clone();
        for (_, _, state) in image.all_partitions() {
            *led.entry(state.value.leader).or_default() += 1;
            for replica in &state.value.replicas {
                *replicated.entry(*replica).or_default() += 1;
            }
        }
        led.remove(&skiff_cluster::records::NO_LEADER);
        Self {
            brokers: image.brokers().len(),
            revision: image.revision(),
            partitions: image.all_partitions().count(),
            offline: image.offline_partitions(),
            led,
            replicated,
        }
    }
}

/// Samples by broker id, for a gauge family labelled `broker`.
pub(super) fn by_broker(counts: BTreeMap<i32, i64>) -> Vec<(String, i64)> {
    counts
        .into_iter()
        .map(|(id, count)| (id.to_string(), count))
        .collect()
}

/// The cluster section, rendered from the cluster at each scrape.
struct ClusterMetrics(ClusterHandle);

impl MetricsSection for ClusterMetrics {
    fn render(&self, out: &mut Exposition) {
        self.0.render_cluster_metrics(out);
    }
}

impl Cluster {
    /// Registers the cluster's and placement's `/metrics` sections.
    pub(crate) fn register_metrics(self: &Arc<Self>, metrics: &Metrics) {
        metrics.register(Arc::new(ClusterMetrics(self.clone())));
        metrics.register(Arc::new(shedding::PlacementMetrics(self.clone())));
    }

    /// The glue's counters, then the image's gauges.
    fn render_cluster_metrics(&self, out: &mut Exposition) {
        let counters = [
            (
                "skiff_cluster_store_errors_total",
                "Failed metadata store calls (each is retried).",
                &self.counters.store_errors,
            ),
            (
                "skiff_cluster_sessions_lost_total",
                "Times this broker's session lease expired under it.",
                &self.counters.sessions_lost,
            ),
            (
                "skiff_cluster_controller_terms_total",
                "Controller elections this broker won.",
                &self.counters.controller_terms_won,
            ),
            (
                "skiff_cluster_controller_writes_total",
                "Fenced Txns this broker submitted as controller.",
                &self.counters.controller_writes,
            ),
            (
                "skiff_cluster_controller_writes_refused_total",
                "Controller Txns whose compares failed (a stale image or a lost term).",
                &self.counters.controller_writes_refused,
            ),
            (
                "skiff_cluster_watch_resumes_total",
                "Times the metadata watch broke and was resumed.",
                &self.counters.watch_resumes,
            ),
            (
                "skiff_unclean_leader_elections_total",
                "Partitions this broker, as controller, gave a leader from outside their ISR \
                 (unclean.leader.election.enable): acknowledged records may be lost.",
                &self.counters.unclean_leader_elections,
            ),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value.load(Ordering::Relaxed));
        }
        self.render_image_gauges(out);
    }

    /// The gauges of this broker's image and of its own standing (controller, session).
    fn render_image_gauges(&self, out: &mut Exposition) {
        let figures = self.with_image(ImageFigures::of).unwrap_or_default();
        // Kafka reports OfflinePartitionsCount on the active controller only, so that a sum over
        // the brokers counts each partition once.
        let offline = if self.is_controller() {
            figures.offline
        } else {
            0
        };
        let gauges = [
            (
                "skiff_cluster_brokers",
                "Live brokers in this broker's image.",
                figures.brokers as i64,
            ),
            (
                "skiff_cluster_partitions",
                "Partition states in this broker's image.",
                figures.partitions as i64,
            ),
            (
                "skiff_cluster_partitions_offline",
                "Partitions without a live leader (Kafka's OfflinePartitionsCount): reported by \
                 the controller, 0 on the other brokers.",
                offline as i64,
            ),
            (
                "skiff_cluster_image_revision",
                "Store revision this broker's image has reached.",
                figures.revision,
            ),
            (
                "skiff_cluster_controller",
                "1 while this broker is the controller.",
                i64::from(self.is_controller()),
            ),
            (
                "skiff_cluster_controller_id",
                "The controller's node id (-1: none known).",
                i64::from(self.controller_id().unwrap_or(-1)),
            ),
            (
                "skiff_cluster_session_alive",
                "1 while this broker's session is provably alive (it may lead).",
                i64::from(self.may_lead()),
            ),
        ];
        for (name, help, value) in gauges {
            out.gauge(name, help, value);
        }
        out.labelled_gauges(
            "skiff_cluster_partitions_led",
            "Partitions each broker leads, in this broker's image.",
            "broker",
            by_broker(figures.led),
        );
        out.labelled_gauges(
            "skiff_cluster_partitions_replicated",
            "Partition replicas each broker holds, in this broker's image.",
            "broker",
            by_broker(figures.replicated),
        );
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use skiff_cluster::records::{
        encode, BrokerRegistration, BrokerState, PartitionState, TopicRecord, TopicState, Writer,
        NO_LEADER,
    };
    use skiff_cluster::{Key, Layout};
    use skiff_meta::{GetRequest, MetaCore, Txn, TxnOp};

    /// An image of brokers `brokers` and one topic whose partitions have the given leader and
    /// replicas.
    pub(in crate::cluster) fn image(brokers: &[i32], partitions: &[(i32, &[i32])]) -> ClusterImage {
        let layout = Layout::new("t").expect("layout");
        let mut core = MetaCore::new();
        let mut put = |key: Key, value: Vec<u8>| {
            core.txn(&Txn::new().and_then(vec![TxnOp::put(layout.key(&key), value)]))
                .expect("put");
        };
        for id in brokers {
            let registration = BrokerRegistration {
                node_id: *id,
                directory_id: format!("dir-{id}"),
                incarnation: "i".into(),
                rack: None,
                listeners: Vec::new(),
                state: BrokerState::Running,
            };
            put(Key::Broker(*id), encode(&registration));
        }
        let topic = TopicRecord {
            topic_id: "0".repeat(32),
            state: TopicState::Ready,
            replicas: partitions.iter().map(|(_, r)| r.to_vec()).collect(),
            configs: Default::default(),
            author: 0,
            author_epoch: 0,
        };
        put(Key::Topic("t".into()), encode(&topic));
        for (index, (leader, replicas)) in (0..).zip(partitions) {
            let state = PartitionState {
                leader: *leader,
                leader_epoch: 0,
                isr: replicas.to_vec(),
                replicas: replicas.to_vec(),
                writer: Writer::Creator,
            };
            put(Key::Partition("t".into(), index), encode(&state));
        }
        let mut image = ClusterImage::new(layout.clone());
        image.reload(&core.get(&GetRequest::prefix(layout.root())).expect("get"));
        image
    }

    #[test]
    fn every_live_broker_has_its_leaderships_and_replicas_counted() {
        let figures = ImageFigures::of(&image(
            &[1, 2, 3],
            &[(1, &[1, 2]), (1, &[1, 3]), (NO_LEADER, &[2, 3])],
        ));
        assert_eq!(figures.brokers, 3);
        assert_eq!(figures.partitions, 3);
        assert_eq!(figures.offline, 1);
        assert_eq!(figures.led, BTreeMap::from([(1, 2), (2, 0), (3, 0)]));
        assert_eq!(figures.replicated, BTreeMap::from([(1, 2), (2, 2), (3, 2)]));
        assert_eq!(
            by_broker(figures.led),
            [
                ("1".to_owned(), 2),
                ("2".to_owned(), 0),
                ("3".to_owned(), 0)
            ]
        );
    }

    #[test]
    fn an_empty_image_has_no_figures_but_its_revision() {
        let figures = ImageFigures::of(&image(&[], &[]));
        assert_eq!(figures.brokers, 0);
        assert_eq!(figures.partitions, 0);
        assert!(figures.led.is_empty());
        assert!(figures.revision > 0);
    }
}
