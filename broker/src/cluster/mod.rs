//! Cluster membership and the controller, glued to the metadata store (docs/design/cluster.md
//! §2–§3): the broker's session lease and registration, its image of the store kept by a watch, and
//! the controller it runs when it wins the election. Every decision is `skiff-cluster`'s pure code;
//! this module submits its Txns, feeds it the watch, and passes the clock in.
//!
//! On the default `local` store the broker is a cluster of one: it registers, campaigns and wins,
//! through the same code a cluster of many runs on etcd.
//!
//! This module holds [`Cluster`] itself and its start; its parts are in files by concern:
//! - [`session`]: the session lease and registration, the image kept by the watch (the
//!   **session** and **follow** tasks), and what rides on the session: producer-id blocks, load
//!   reports, controlled shutdown and leaving;
//! - [`controller`]: the **control** task, which campaigns when the image has no controller and,
//!   as controller, submits `skiff_cluster::controller::plan` (then the rebalance, bundle moves
//!   and the [`shedding`] cycle) whenever the image has caught up with its last writes;
//! - [`figures`]: the cluster's `/metrics` families, registered in `crate::metrics` (the
//!   placement families are [`shedding`]'s).
//!
//! Every task stops at shutdown.
//!
//! Parts of the broker that keep their own records in the store (client quotas, dynamic broker
//! configs) follow their prefix with [`prefix_watch`], and write through its bounded calls.
//!
//! ElectLeaders and AlterPartitionReassignments requests are planned and written by the broker
//! that receives them ([`requests`]: [`elections`], [`reassignments`]), fenced on its session;
//! the controller carries out the reassignments. Creating and growing topics, for CreateTopics,
//! CreatePartitions and every auto-creation, is [`topic_creation`].
//!
//! The cluster's ACLs and SCRAM users (`R/security/`) have their own watch and writes in
//! [`security_store`].
//!
//! At a graceful shutdown, [`Cluster::controlled_shutdown`] marks the registration
//! `shutting_down` and waits (the broker still serving) until the image shows the controller has
//! moved its leaderships away; [`Cluster::leave`] then revokes the lease.
//!
//! Must never: decide leadership itself (the pure plan does), trust a past answer about being
//! controller (every write is fenced), or block a request path on the store.

mod controller;
pub mod elections;
mod figures;
pub mod identity;
pub mod isr;
pub mod materialize;
pub(crate) mod prefix_watch;
pub mod reassignments;
pub mod requests;
pub mod roles;
pub(crate) mod security_store;
mod session;
pub mod shedding;
pub mod topic_changes;
pub(crate) mod topic_creation;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use skiff_cluster::membership;
use skiff_cluster::records::{BrokerRegistration, BrokerState, ClusterRecord, Endpoint};
use skiff_cluster::{ClusterImage, Key, Layout, SessionFence};
use skiff_meta::{GetRequest, LeaseId, MetaStore, StoreAddress};
use tokio::sync::watch;

use crate::config::Config;

/// The embedded store's directory, inside `log.dirs` (a name the log directory never takes for a
/// partition, which always ends in `-<number>`).
pub const LOCAL_STORE_DIR: &str = "metadata-store";
/// Pause between retries of a failed store call.
const RETRY_BACKOFF: Duration = Duration::from_millis(250);

/// Why cluster membership could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The data directory's identity.
    #[error(transparent)]
    Identity(#[from] identity::IdentityError),
    /// The store could not be reached within `skiff.metadata.start.timeout.ms`.
    #[error(
        "metadata store {address} unreachable for {waited_ms} ms \
         (skiff.metadata.start.timeout.ms): {last_error}"
    )]
    Unreachable {
        /// `skiff.metadata.store`.
        address: String,
        /// How long it was tried.
        waited_ms: u64,
        /// The last error seen.
        last_error: String,
    },
    /// The store refused an operation in a way retrying cannot fix.
    #[error("metadata store {address}: {source}")]
    Store {
        /// `skiff.metadata.store`.
        address: String,
        /// The error.
        source: skiff_meta::Error,
    },
    /// The registration was refused (a live duplicate `node.id`) or unreadable.
    #[error(transparent)]
    Membership(#[from] membership::MembershipError),
    /// `skiff.cluster.name` (validated at config load; kept for completeness).
    #[error(transparent)]
    ClusterName(#[from] skiff_cluster::layout::ClusterNameError),
    /// A topic of the single-node registry has another id in the store: two different topics
    /// share the name, and neither is overwritten.
    #[error(
        "cannot migrate topic {topic}: skiff-topics.json gives it id {file_id}, the metadata \
         store has id {store_id}. Two different topics have that name; move this data \
         directory aside or delete one of them"
    )]
    MigrationConflict {
        /// The topic.
        topic: String,
        /// Its id in the file.
        file_id: String,
        /// Its id in the store.
        store_id: String,
    },
    /// The migration of the single-node registry could not finish.
    #[error("migrating skiff-topics.json into the metadata store: {0}")]
    Migration(String),
    /// A start-up step on a blocking thread did not finish.
    #[error("{what}: {source}")]
    Task {
        /// The step.
        what: &'static str,
        /// Why.
        source: tokio::task::JoinError,
    },
}

/// The broker's view of the cluster, shared by handlers and the cluster tasks.
pub struct Cluster {
    node_id: i32,
    address: StoreAddress,
    layout: Layout,
    store: MetaStore,
    cluster_id: String,
    /// The registration as at start (`running`); [`Self::shutting_down`] overrides its state.
    registration: BrokerRegistration,
    /// Set once a controlled shutdown began: a registration written from then on (after a lost
    /// session) says `shutting_down` too.
    shutting_down: AtomicBool,
    /// `unclean.leader.election.enable`, the default of topics without their own: a dynamic
    /// broker config, set again by [`Self::set_unclean_leader_election_default`].
    unclean_leader_election_default: AtomicBool,
    /// With `auto.leader.rebalance.enable`: how often the controller checks the imbalance, and
    /// `leader.imbalance.per.broker.percentage`.
    rebalance: Option<(Duration, u32)>,
    ttl_secs: i64,
    image: RwLock<ClusterImage>,
    /// The image's revision, for tasks waiting on it to move.
    image_revision: watch::Sender<i64>,
    /// The image revision the topics and logs last followed (`materialize`).
    materialized: watch::Sender<i64>,
    fence: Mutex<SessionFence>,
    session: Mutex<Option<session::Session>>,
    controller_epoch: Mutex<Option<i64>>,
    /// The controller's shedding cycle (settings, shedder state, the last plan).
    shedding: Mutex<shedding::Shedding>,
    shedding_counters: shedding::SheddingCounters,
    /// The load report last written to `R/load/<id>`, and the lease it went on.
    last_load: Mutex<Option<(skiff_cluster::records::LoadRecord, LeaseId)>>,
    counters: figures::ClusterCounters,
    /// The base of the session fence's monotonic milliseconds.
    started: std::time::Instant,
}

/// The shared handle.
pub type ClusterHandle = Arc<Cluster>;

/// Whether a store error may pass by retrying (an unreachable or leaderless store); anything
/// else the store said (a refused request) is not retried at start.
fn is_retriable(error: &skiff_meta::Error) -> bool {
    error.is_retriable()
}

impl Cluster {
    /// Joins the cluster: opens the store (retrying for `skiff.metadata.start.timeout.ms`),
    /// checks or records the cluster id, registers under a fresh lease, loads the image, and
    /// starts the session, follow and control tasks.
    /// `files`: the log directory's file operations, which the node identity is kept through.
    pub async fn start(
        config: &Config,
        files: skiff_storage::DurableFiles,
        listeners: Vec<Endpoint>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<ClusterHandle, ClusterError> {
        let layout = Layout::new(&config.cluster_name)?;
        let joined = join_store(config, &layout, files).await?;
        let deadline = joined.deadline;
        let registration = BrokerRegistration {
            node_id: config.node_id,
            directory_id: joined.identity.directory_id.clone(),
            incarnation: identity::random_id(),
            rack: config.broker_rack.clone(),
            listeners,
            state: BrokerState::Running,
        };
        let cluster = Arc::new(Cluster::assemble(config, layout, joined, registration));
        let timeout_ms = config.metadata_start_timeout_ms;
        cluster.register(Some((deadline, timeout_ms))).await?;
        let snapshot = retry_until(&cluster.address, deadline, timeout_ms, || {
            cluster.store.get(GetRequest::prefix(cluster.layout.root()))
        })
        .await?;
        cluster.reload(&snapshot);
        // Campaign once before serving, so the first clients already see a controller (on one
        // node, always this broker).
        if cluster.controller_id().is_none() {
            if let Some(session) = cluster.session.lock().ok().and_then(|s| *s) {
                cluster.campaign(session).await;
            }
        }
        tokio::spawn(cluster.clone().keep_session(shutdown.clone()));
        tokio::spawn(cluster.clone().follow(shutdown.clone()));
        tokio::spawn(cluster.clone().control(shutdown));
        tracing::info!(
            cluster_id = %cluster.cluster_id,
            store = %cluster.address,
            node_id = cluster.node_id,
            "joined the cluster"
        );
        Ok(cluster)
    }

    /// The cluster of a broker that joined the store, before it registers.
    fn assemble(
        config: &Config,
        layout: Layout,
        joined: Joined,
        registration: BrokerRegistration,
    ) -> Self {
        let (image_revision, _) = watch::channel(0);
        let (materialized, _) = watch::channel(0);
        Cluster {
            node_id: config.node_id,
            address: joined.address,
            image: RwLock::new(ClusterImage::new(layout.clone())),
            layout,
            store: joined.store,
            cluster_id: joined.cluster_id,
            registration,
            shutting_down: AtomicBool::new(false),
            unclean_leader_election_default: AtomicBool::new(config.unclean_leader_election_enable),
            rebalance: config.auto_leader_rebalance_enable.then(|| {
                (
                    Duration::from_secs(config.leader_imbalance_check_interval_seconds),
                    config.leader_imbalance_per_broker_percentage,
                )
            }),
            ttl_secs: i64::try_from(config.broker_session_timeout_ms / 1000).unwrap_or(1),
            image_revision,
            materialized,
            fence: Mutex::new(SessionFence::new(config.broker_session_timeout_ms)),
            session: Mutex::new(None),
            controller_epoch: Mutex::new(None),
            last_load: Mutex::new(None),
            shedding: Mutex::new(shedding::Shedding::new(config)),
            shedding_counters: shedding::SheddingCounters::default(),
            counters: figures::ClusterCounters::default(),
            started: crate::clock::instant(),
        }
    }

    fn mono_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Kafka's cluster id, from `R/cluster`.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Makes `enabled` the `unclean.leader.election.enable` of topics without their own (the
    /// dynamic broker config changed); the controller's next plan uses it.
    pub(crate) fn set_unclean_leader_election_default(&self, enabled: bool) {
        self.unclean_leader_election_default
            .store(enabled, Ordering::Relaxed);
    }

    /// This broker's `node.id`.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The metadata store, for the parts of the broker that keep their own records in it
    /// (client quotas, dynamic broker configs) under [`Self::store_root`].
    pub fn store(&self) -> &MetaStore {
        &self.store
    }

    /// The root every key of this cluster lives under (`R` of docs/design/cluster.md §2a).
    pub fn store_root(&self) -> &str {
        self.layout.root()
    }

    /// The controller's id, if the image knows one.
    pub fn controller_id(&self) -> Option<i32> {
        self.image.read().ok()?.controller().map(|(id, _)| id)
    }

    /// Every live broker's registration, by id.
    pub fn live_brokers(&self) -> Vec<BrokerRegistration> {
        self.image
            .read()
            .map(|image| image.brokers().values().map(|v| v.value.clone()).collect())
            .unwrap_or_default()
    }

    fn store_error(&self, what: &str, error: &skiff_meta::Error) {
        self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(store = %self.address, %error, "metadata store: {what} failed");
    }

    fn fatal(&self, source: skiff_meta::Error) -> ClusterError {
        ClusterError::Store {
            address: self.address.to_string(),
            source,
        }
    }
}

/// What joining the store gave: this directory's identity (with the cluster id recorded),
/// the store and the cluster's id, and the start deadline the registration still has.
struct Joined {
    identity: identity::Identity,
    address: StoreAddress,
    store: MetaStore,
    cluster_id: String,
    deadline: std::time::Instant,
}

/// Reads or creates this directory's identity, opens the store (retrying until
/// `skiff.metadata.start.timeout.ms` passes), and checks or records the cluster id in the store
/// and in the identity.
async fn join_store(
    config: &Config,
    layout: &Layout,
    files: skiff_storage::DurableFiles,
) -> Result<Joined, ClusterError> {
    let data_dir = config.log_dirs.clone();
    let node_id = config.node_id;
    let mut identity = {
        let dir = data_dir.clone();
        let files = files.clone();
        tokio::task::spawn_blocking(move || identity::load_or_create(&dir, &files, node_id))
            .await
            .map_err(|source| ClusterError::Task {
                what: "reading the node identity",
                source,
            })??
    };
    // The start timeout counts from here, once the identity is read.
    let deadline =
        crate::clock::instant() + Duration::from_millis(config.metadata_start_timeout_ms);
    let address = config.metadata_store.clone();
    let store_dir = data_dir.join(LOCAL_STORE_DIR);
    let store = retry_until(&address, deadline, config.metadata_start_timeout_ms, || {
        MetaStore::open(&address, &store_dir)
    })
    .await?;
    // The first read proves the store answers (an etcd client connects lazily).
    retry_until(&address, deadline, config.metadata_start_timeout_ms, || {
        store.get(GetRequest::key(layout.key(&Key::Cluster)))
    })
    .await?;
    let ours = ClusterRecord {
        cluster_id: identity
            .cluster_id
            .clone()
            .unwrap_or_else(identity::random_id),
        layout: skiff_cluster::records::LAYOUT_VERSION,
        created_ms: u64::try_from(crate::clock::now_ms()).unwrap_or(0),
    };
    let response = retry_until(&address, deadline, config.metadata_start_timeout_ms, || {
        store.txn(membership::create_cluster(layout, &ours))
    })
    .await?;
    let cluster_id = membership::cluster_outcome(&ours, &response)?.cluster_id;
    {
        let dir = data_dir.clone();
        let cluster_id = cluster_id.clone();
        let mut joined = identity.clone();
        identity = tokio::task::spawn_blocking(move || {
            identity::join_cluster(&dir, &files, &mut joined, &cluster_id).map(|()| joined)
        })
        .await
        .map_err(|source| ClusterError::Task {
            what: "recording the cluster id",
            source,
        })??;
    }
    Ok(Joined {
        identity,
        address,
        store,
        cluster_id,
        deadline,
    })
}

/// Runs `call` until it succeeds, a non-retriable error comes, or `deadline` passes.
async fn retry_until<T, F, Fut>(
    address: &StoreAddress,
    deadline: std::time::Instant,
    timeout_ms: u64,
    mut call: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = skiff_meta::Result<T>>,
{
    loop {
        let error = match call().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if !is_retriable(&error) {
            return Err(ClusterError::Store {
                address: address.to_string(),
                source: error,
            });
        }
        if crate::clock::instant() + RETRY_BACKOFF >= deadline {
            return Err(ClusterError::Unreachable {
                address: address.to_string(),
                waited_ms: timeout_ms,
                last_error: error.to_string(),
            });
        }
        tracing::warn!(store = %address, %error, "metadata store not reachable yet; retrying");
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}
