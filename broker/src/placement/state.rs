//! The broker's placement state: the cluster view (the running brokers of the cluster image, with
//! their racks and load reports, set before each assignment), the replica policy and a seeded
//! RNG, behind one lock. Topic creation asks it for replica assignments through the pure BP-65
//! code, with each partition's preferred leader (its bundle's owner,
//! `skiff_cluster::preferred_leaders`) given; CreatePartitions asks it for added partitions the
//! same way. It also keeps the last reading of the traffic counters, which each load sample's
//! traffic rates are measured from.
//!
//! The bundle map is not here: it is the controller's bundle records in the cluster image
//! (`skiff_cluster::bundles`), on one node as in a cluster.
//!
//! Must never: decide anything itself — every decision is `skiff-placement`'s — or block on IO while
//! holding its lock.

use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use skiff_placement::{
    assign_replicas, ClusterView, NodeId, PlacementError, PreferredLeader, ReplicaPolicy,
};

use skiff_cluster::traffic::{traffic_rates, TrafficInterval, TrafficReading};

use super::sampler::LoadSampler;

/// Load samples smoothed into one report (BP-65's sliding window).
pub(crate) const LOAD_WINDOW_SAMPLES: usize = 3;

/// A reading of the traffic counters and when it was taken (monotonic milliseconds).
type TimedReading = (u64, TrafficReading);

struct Inner {
    view: ClusterView,
    /// This node's load as its sampler last smoothed it.
    own_load: skiff_placement::LoadReport,
    policy: ReplicaPolicy,
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
    /// State for this node.
    pub(crate) fn new(node_id: NodeId, data_dir: &std::path::Path) -> Self {
        // The seed only has to differ between brokers so independent placers do not draw alike.
        let seed = u64::from(node_id.unsigned_abs()) ^ 0x5eed_5eed_5eed_5eed;
        Self {
            node_id,
            inner: Mutex::new(Inner {
                view: ClusterView::single(node_id),
                own_load: skiff_placement::LoadReport::unknown(),
                policy: ReplicaPolicy::default(),
                rng: ChaCha8Rng::seed_from_u64(seed),
            }),
            sampler: Mutex::new(LoadSampler::new(data_dir, LOAD_WINDOW_SAMPLES)),
            traffic: Mutex::new(None),
        }
    }

    /// Replicas for new partitions of a topic that has `existing` (CreatePartitions without an
    /// assignment; 0 for a new topic), one per entry of `leaders` (each one's preferred leader).
    pub(crate) fn assign_added(
        &self,
        topic: &str,
        leaders: &[PreferredLeader],
        replication_factor: usize,
    ) -> Result<Vec<Vec<NodeId>>, PlacementError> {
        let mut inner = self.lock()?;
        let Inner {
            view, policy, rng, ..
        } = &mut *inner;
        assign_replicas(topic, leaders, replication_factor, view, policy, rng)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, PlacementError> {
        self.inner
            .lock()
            .map_err(|_| PlacementError::UnknownBundle("placement state poisoned".to_owned()))
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
