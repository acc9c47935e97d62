//! The broker's placement state: the cluster view (the running brokers of the cluster image, with
//! their racks and load reports, set before each assignment), the replica policy, the bundle map
//! and a seeded RNG, behind one lock. Topic creation asks it for replica assignments and bundle
//! membership through the pure BP-65 code, with each partition's preferred leader (its bundle's
//! owner, `skiff_cluster::preferred_leaders`) given; CreatePartitions asks it for added
//! partitions the same way.
//! It also keeps the last reading of the traffic counters, which each load sample's traffic
//! rates are measured from.
//! Operators read the bundles as JSON (`/placement/bundles` on the metrics listener).
//!
//! The bundle map is rebuilt at start from the topics (each partition's bundle is a pure function
//! of its name, and on one node every bundle is owned by this node), so it needs no file of its own.
//!
//! Must never: decide anything itself — every decision is `skiff-placement`'s — or block on IO while
//! holding its lock.

use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use skiff_placement::bundle::NAMESPACE_BUNDLES_DEFAULT;
use skiff_placement::{
    assign_replicas, BundleMap, BundleSnapshot, ClusterView, NamespaceRule, NodeId, PlacementError,
    PreferredLeader, ReplicaPolicy,
};

use skiff_cluster::traffic::{traffic_rates, TrafficInterval, TrafficReading};

use super::sampler::LoadSampler;
use crate::partition::topics::Topic;

/// Load samples smoothed into one report (BP-65's sliding window).
pub(crate) const LOAD_WINDOW_SAMPLES: usize = 3;

/// A reading of the traffic counters and when it was taken (monotonic milliseconds).
type TimedReading = (u64, TrafficReading);

struct Inner {
    view: ClusterView,
    /// This node's load as its sampler last smoothed it.
    own_load: skiff_placement::LoadReport,
    policy: ReplicaPolicy,
    bundles: BundleMap,
    rng: ChaCha8Rng,
}

/// Placement state shared by the handlers.
pub(crate) struct PlacementState {
    node_id: NodeId,
    inner: Mutex<Inner>,
    sampler: Mutex<LoadSampler>,
    /// The last traffic reading, which the next one's rates are measured from.
    traffic: Mutex<Option<TimedReading>>,
}

impl PlacementState {
    /// State for this node, with the bundles of the `topics` that exist.
    pub(crate) fn new(
        node_id: NodeId,
        data_dir: &std::path::Path,
        topics: &[std::sync::Arc<Topic>],
    ) -> Result<Self, PlacementError> {
        let mut bundles = BundleMap::new(NamespaceRule::Topic, NAMESPACE_BUNDLES_DEFAULT)?;
        for topic in topics {
            for (partition, replicas) in (0u32..).zip(&topic.record.replicas) {
                let bundle = bundles.locate(&topic.name, partition);
                bundles.set_owner(&bundle, replicas.first().copied().unwrap_or(node_id))?;
            }
        }
        // The seed only has to differ between brokers so independent placers do not draw alike.
        let seed = u64::from(node_id.unsigned_abs()) ^ 0x5eed_5eed_5eed_5eed;
        Ok(Self {
            node_id,
            inner: Mutex::new(Inner {
                view: ClusterView::single(node_id),
                own_load: skiff_placement::LoadReport::unknown(),
                policy: ReplicaPolicy::default(),
                bundles,
                rng: ChaCha8Rng::seed_from_u64(seed),
            }),
            sampler: Mutex::new(LoadSampler::new(data_dir, LOAD_WINDOW_SAMPLES)),
            traffic: Mutex::new(None),
        })
    }

    /// Replicas for new partitions of a topic that has `existing` (CreatePartitions without an
    /// assignment; 0 for a new topic), one per entry of `leaders` (each one's preferred leader);
    /// with `record_bundles`, the bundles of the new partitions are recorded with their owners.
    pub(crate) fn assign_added(
        &self,
        topic: &str,
        existing: usize,
        leaders: &[PreferredLeader],
        replication_factor: usize,
        record_bundles: bool,
    ) -> Result<Vec<Vec<NodeId>>, PlacementError> {
        let mut inner = self.lock()?;
        let Inner {
            view,
            policy,
            bundles,
            rng,
            ..
        } = &mut *inner;
        let replicas = assign_replicas(topic, leaders, replication_factor, view, policy, rng)?;
        if record_bundles {
            self.record_bundles(bundles, topic, existing, &replicas)?;
        }
        Ok(replicas)
    }

    /// Records the bundles of partitions `first..` of `topic` whose replicas a client chose
    /// (CreatePartitions with an assignment), each owned by its preferred leader.
    pub(crate) fn record_assignment(
        &self,
        topic: &str,
        first: usize,
        replicas: &[Vec<NodeId>],
    ) -> Result<(), PlacementError> {
        let mut inner = self.lock()?;
        self.record_bundles(&mut inner.bundles, topic, first, replicas)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, PlacementError> {
        self.inner
            .lock()
            .map_err(|_| PlacementError::UnknownBundle("placement state poisoned".to_owned()))
    }

    fn record_bundles(
        &self,
        bundles: &mut BundleMap,
        topic: &str,
        first: usize,
        replicas: &[Vec<NodeId>],
    ) -> Result<(), PlacementError> {
        let first = u32::try_from(first).unwrap_or(u32::MAX);
        for (partition, nodes) in (first..).zip(replicas) {
            let bundle = bundles.locate(topic, partition);
            bundles.set_owner(&bundle, nodes.first().copied().unwrap_or(self.node_id))?;
        }
        Ok(())
    }

    /// This node's own load as its sampler last smoothed it, with its write capacity (for the
    /// cluster view while its report is not in the store yet).
    pub(crate) fn local_load(&self) -> Option<(skiff_placement::LoadReport, u64)> {
        let inner = self.inner.lock().ok()?;
        Some((inner.own_load, 0))
    }

    /// Replaces the brokers placement chooses from (the running ones of the cluster image).
    pub(crate) fn set_nodes(&self, nodes: Vec<skiff_placement::Node>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.view.nodes = nodes;
        }
    }

    /// Makes each bundle's owner the broker leading its partitions, as the cluster image has them
    /// (`(topic, partition, leader)`; partitions without a leader keep their owner), so the
    /// bundle view is the cluster's, not only what this broker created.
    pub(crate) fn follow_leaders(&self, leaders: impl IntoIterator<Item = (String, i32, NodeId)>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        for (topic, partition, leader) in leaders {
            let (Ok(partition), true) = (u32::try_from(partition), leader >= 0) else {
                continue;
            };
            let bundle = inner.bundles.locate(&topic, partition);
            if let Err(error) = inner.bundles.set_owner(&bundle, leader) {
                tracing::warn!(%topic, partition, %error, "bundle owner from the image");
            }
        }
    }

    /// The bundles, their ranges, owners and load.
    pub(crate) fn snapshot(&self) -> Option<BundleSnapshot> {
        self.inner.lock().ok().map(|inner| inner.bundles.snapshot())
    }

    /// This node's traffic since the last reading, from `reading` taken at `mono_ms`, and
    /// whether its rates are known (`false` for the first reading: a rate needs two; its gains,
    /// everything counted since the partitions opened, still count).
    pub(crate) fn sample_traffic(
        &self,
        mono_ms: u64,
        reading: TrafficReading,
    ) -> Option<(TrafficInterval, bool)> {
        let mut last = self.traffic.lock().ok()?;
        let (interval, known) = match last.as_ref() {
            Some((at_ms, previous)) => (
                traffic_rates(previous, &reading, mono_ms.saturating_sub(*at_ms)),
                true,
            ),
            None => (
                traffic_rates(&TrafficReading::default(), &reading, 0),
                false,
            ),
        };
        *last = Some((mono_ms, reading));
        Some((interval, known))
    }

    /// Takes one load sample of this node (reads /proc and statvfs: call it off the async workers)
    /// and, once the window is full, updates the cluster view and returns the smoothed report
    /// (for `R/load/<id>`).
    pub(crate) fn sample_load(
        &self,
        now_ms: u64,
        write_bytes_total: Option<u64>,
    ) -> Option<skiff_placement::LoadReport> {
        let report = match self.sampler.lock() {
            Ok(mut sampler) => sampler.sample(now_ms, write_bytes_total),
            Err(_) => None,
        };
        if let (Some(report), Ok(mut inner)) = (report, self.inner.lock()) {
            inner.own_load = report;
            if let Some(node) = inner
                .view
                .nodes
                .iter_mut()
                .find(|node| node.id == self.node_id)
            {
                node.load = report;
            }
        }
        report
    }
}
