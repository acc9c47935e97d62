//! Cluster membership and the controller, glued to the metadata store (docs/design/cluster.md
//! §2–§3): the broker's session lease and registration, its image of the store kept by a watch, and
//! the controller it runs when it wins the election. Every decision is `skiff-cluster`'s pure code;
//! this module submits its Txns, feeds it the watch, and passes the clock in.
//!
//! On the default `local` store the broker is a cluster of one: it registers, campaigns and wins,
//! through the same code a cluster of many runs on etcd.
//!
//! Tasks (each stops at shutdown):
//! - **session**: keeps the lease alive every third of `broker.session.timeout.ms`; when the store
//!   says the lease is gone (a pause past the session, a partition from etcd) it registers again
//!   under a new lease (a new broker epoch);
//! - **follow**: applies the watch to the image, resumes it from the last revision after a broken
//!   stream, and re-GETs after a compaction;
//! - **control**: campaigns when the image has no controller; as controller, submits
//!   `skiff_cluster::controller::plan` whenever the image has caught up with its last writes, and
//!   steps down as soon as its fence fails; every `leader.imbalance.check.interval.seconds`,
//!   once the plan is empty, it submits `skiff_cluster::controller::rebalance` too.
//!
//! ElectLeaders and AlterPartitionReassignments requests are planned and written by the broker
//! that receives them ([`requests`]: [`elections`], [`reassignments`]), fenced on its session;
//! the controller carries out the reassignments. Creating and growing topics, for CreateTopics,
//! CreatePartitions and every auto-creation, is [`topic_creation`].
//!
//! At a graceful shutdown, [`Cluster::controlled_shutdown`] marks the registration
//! `shutting_down` and waits (the broker still serving) until the image shows the controller has
//! moved its leaderships away; [`Cluster::leave`] then revokes the lease.
//!
//! Must never: decide leadership itself (the pure plan does), trust a past answer about being
//! controller (every write is fenced), or block a request path on the store.

pub mod elections;
pub mod identity;
pub mod isr;
pub mod materialize;
pub mod reassignments;
pub mod requests;
pub mod roles;
pub mod shedding;
pub mod topic_changes;
pub(crate) mod topic_creation;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use skiff_cluster::controller::{self, ControllerWrite, PlanLimits, WriteReason};
use skiff_cluster::membership::{self, Campaign, Registration};
use skiff_cluster::records::{BrokerRegistration, BrokerState, ClusterRecord, Endpoint};
use skiff_cluster::{ClusterImage, Key, Layout, SessionFence};
use skiff_meta::{GetRequest, KeyRange, LeaseId, MetaStore, StoreAddress};
use tokio::sync::watch;

use crate::config::Config;

/// The embedded store's directory, inside `log.dirs` (a name the log directory never takes for a
/// partition, which always ends in `-<number>`).
pub const LOCAL_STORE_DIR: &str = "metadata-store";
/// Pause between retries of a failed store call.
const RETRY_BACKOFF: Duration = Duration::from_millis(250);
/// How often the controller re-plans even when nothing changed in the image (a write that failed
/// without an image change is retried at this pace).
const CONTROLLER_TICK: Duration = Duration::from_millis(1000);

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

/// Counters of the cluster glue, for `/metrics`.
#[derive(Debug, Default)]
struct ClusterCounters {
    store_errors: AtomicU64,
    sessions_lost: AtomicU64,
    controller_terms_won: AtomicU64,
    controller_writes: AtomicU64,
    controller_writes_refused: AtomicU64,
    watch_resumes: AtomicU64,
    unclean_leader_elections: AtomicU64,
}

/// What the session task knows of the current registration.
#[derive(Debug, Clone, Copy)]
struct Session {
    lease: LeaseId,
    broker_epoch: i64,
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
    /// `unclean.leader.election.enable`, the default of topics without their own.
    unclean_leader_election_default: bool,
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
    session: Mutex<Option<Session>>,
    controller_epoch: Mutex<Option<i64>>,
    /// The controller's shedding cycle (settings, shedder state, the last plan).
    shedding: Mutex<shedding::Shedding>,
    shedding_counters: shedding::SheddingCounters,
    /// The load report last written to `R/load/<id>`, and the lease it went on.
    last_load: Mutex<Option<(skiff_cluster::records::LoadRecord, LeaseId)>>,
    counters: ClusterCounters,
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
            store.txn(membership::create_cluster(&layout, &ours))
        })
        .await?;
        let cluster = membership::cluster_outcome(&ours, &response)?;
        {
            let dir = data_dir.clone();
            let cluster_id = cluster.cluster_id.clone();
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
        let registration = BrokerRegistration {
            node_id,
            directory_id: identity.directory_id.clone(),
            incarnation: identity::random_id(),
            rack: config.broker_rack.clone(),
            listeners,
            state: BrokerState::Running,
        };
        let ttl_secs = i64::try_from(config.broker_session_timeout_ms / 1000).unwrap_or(1);
        let (image_revision, _) = watch::channel(0);
        let (materialized, _) = watch::channel(0);
        let cluster = Arc::new(Cluster {
            node_id,
            address: address.clone(),
            image: RwLock::new(ClusterImage::new(layout.clone())),
            layout,
            store,
            cluster_id: cluster.cluster_id,
            registration,
            shutting_down: AtomicBool::new(false),
            unclean_leader_election_default: config.unclean_leader_election_enable,
            rebalance: config.auto_leader_rebalance_enable.then(|| {
                (
                    Duration::from_secs(config.leader_imbalance_check_interval_seconds),
                    config.leader_imbalance_per_broker_percentage,
                )
            }),
            ttl_secs,
            image_revision,
            materialized,
            fence: Mutex::new(SessionFence::new(config.broker_session_timeout_ms)),
            session: Mutex::new(None),
            controller_epoch: Mutex::new(None),
            last_load: Mutex::new(None),
            shedding: Mutex::new(shedding::Shedding::new(config)),
            shedding_counters: shedding::SheddingCounters::default(),
            counters: ClusterCounters::default(),
            started: crate::clock::instant(),
        });
        cluster
            .register(Some((deadline, config.metadata_start_timeout_ms)))
            .await?;
        let snapshot = retry_until(&address, deadline, config.metadata_start_timeout_ms, || {
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
            node_id,
            "joined the cluster"
        );
        Ok(cluster)
    }

    fn mono_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Kafka's cluster id, from `R/cluster`.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// This broker's `node.id`.
    pub fn node_id(&self) -> i32 {
        self.node_id
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

    /// Whether this broker's session is provably alive now, so it may accept writes as a leader
    /// (`skiff_cluster::session`).
    pub fn may_lead(&self) -> bool {
        let revision = self.image.read().map(|image| image.revision()).unwrap_or(0);
        self.may_lead_at(revision)
    }

    /// [`Self::may_lead`] for an image at `revision` the caller already holds.
    fn may_lead_at(&self, revision: i64) -> bool {
        self.fence
            .lock()
            .map(|fence| fence.may_lead(self.mono_ms(), revision))
            .unwrap_or(false)
    }

    /// Whether this broker currently acts as the controller.
    pub fn is_controller(&self) -> bool {
        self.controller_epoch
            .lock()
            .map(|e| e.is_some())
            .unwrap_or(false)
    }

    fn reload(&self, snapshot: &skiff_meta::GetResponse) {
        let revision = {
            let Ok(mut image) = self.image.write() else {
                return;
            };
            image.reload(snapshot);
            self.report_undecodable(&image);
            image.revision()
        };
        self.image_revision.send_replace(revision);
    }

    fn report_undecodable(&self, image: &ClusterImage) {
        for (key, error) in image.undecodable() {
            tracing::warn!(%key, %error, "metadata key ignored: its value does not decode");
        }
    }

    fn store_error(&self, what: &str, error: &skiff_meta::Error) {
        self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(store = %self.address, %error, "metadata store: {what} failed");
    }

    /// Grants a lease and registers under it. At start (`deadline` given) an unreachable store is
    /// retried until the deadline; later, until it works or the broker shuts down.
    async fn register(
        &self,
        deadline: Option<(std::time::Instant, u64)>,
    ) -> Result<(), ClusterError> {
        loop {
            if let Some((deadline, timeout_ms)) = deadline {
                if crate::clock::instant() >= deadline {
                    return Err(ClusterError::Unreachable {
                        address: self.address.to_string(),
                        waited_ms: timeout_ms,
                        last_error: "registration did not complete".into(),
                    });
                }
            }
            let sent_ms = self.mono_ms();
            let lease = match self.store.lease_grant(self.ttl_secs).await {
                Ok(lease) => lease,
                Err(error) => {
                    self.store_error("lease grant", &error);
                    if !is_retriable(&error) && deadline.is_some() {
                        return Err(self.fatal(error));
                    }
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            };
            if let Ok(mut fence) = self.fence.lock() {
                fence.on_lease_granted(sent_ms, lease.ttl_secs);
            }
            let registration = self.registration_now();
            let txn = membership::register(&self.layout, &registration, lease.id);
            let response = match self.store.txn(txn).await {
                Ok(response) => response,
                Err(error) => {
                    self.store_error("registration", &error);
                    let _ = self.store.lease_revoke(lease.id).await;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            };
            match membership::registration_outcome(&registration, &response)? {
                Registration::Registered { broker_epoch } => {
                    if let Ok(mut fence) = self.fence.lock() {
                        fence.on_registered(broker_epoch);
                    }
                    if let Ok(mut session) = self.session.lock() {
                        *session = Some(Session {
                            lease: lease.id,
                            broker_epoch,
                        });
                    }
                    tracing::info!(broker_epoch, lease = lease.id, "registered");
                    return Ok(());
                }
                Registration::StaleOwnRegistration { lease: old } => {
                    // An earlier process on this data directory (killed, so its lease lives on):
                    // end its session now rather than wait out its TTL.
                    tracing::info!(
                        old_lease = old,
                        "replacing this directory's stale registration"
                    );
                    let _ = self.store.lease_revoke(old).await;
                    let _ = self.store.lease_revoke(lease.id).await;
                }
                Registration::Retry => {
                    let _ = self.store.lease_revoke(lease.id).await;
                }
            }
        }
    }

    /// The registration this broker writes now: `shutting_down` once a controlled shutdown began.
    fn registration_now(&self) -> BrokerRegistration {
        let mut registration = self.registration.clone();
        if self.shutting_down.load(Ordering::Relaxed) {
            registration.state = BrokerState::ShuttingDown;
        }
        registration
    }

    fn fatal(&self, source: skiff_meta::Error) -> ClusterError {
        ClusterError::Store {
            address: self.address.to_string(),
            source,
        }
    }

    fn lose_session(&self) {
        self.counters.sessions_lost.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut fence) = self.fence.lock() {
            fence.on_session_lost();
        }
        if let Ok(mut session) = self.session.lock() {
            *session = None;
        }
        // A controller whose session ended is no longer one (its key died with the lease); said
        // here as well as by the controller loop, whichever notices first.
        if let Ok(mut epoch) = self.controller_epoch.lock() {
            if let Some(lost) = epoch.take() {
                tracing::warn!(
                    controller_epoch = lost,
                    "stepped down as controller: its session was lost"
                );
            }
        }
    }

    async fn keep_session(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let interval = Duration::from_millis(u64::try_from(self.ttl_secs).unwrap_or(1) * 1000 / 3);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
                if let Err(error) = self.register(None).await {
                    tracing::error!(%error, "cannot register again");
                }
                continue;
            };
            let sent_ms = self.mono_ms();
            match self.store.lease_keep_alive(session.lease).await {
                Ok(_) => {
                    if let Ok(mut fence) = self.fence.lock() {
                        fence.on_keep_alive_acknowledged(sent_ms);
                    }
                }
                Err(skiff_meta::Error::LeaseNotFound { .. }) => {
                    tracing::warn!(
                        broker_epoch = session.broker_epoch,
                        "session lost (lease expired): not leading anything until registered again"
                    );
                    self.lose_session();
                    if let Err(error) = self.register(None).await {
                        tracing::error!(%error, "cannot register again");
                    }
                }
                // The fence lapses on its own if this goes on; keep trying.
                Err(error) => self.store_error("keep-alive", &error),
            }
        }
    }

    async fn follow(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            let from = self.image.read().map(|i| i.revision()).unwrap_or(0) + 1;
            let watched = self
                .store
                .watch(KeyRange::prefix(self.layout.root()), from)
                .await;
            let mut watcher = match watched {
                Ok(watcher) => watcher,
                Err(error) => {
                    self.store_error("watch", &error);
                    self.resync_or_wait(&error, &mut shutdown).await;
                    if *shutdown.borrow() {
                        return;
                    }
                    continue;
                }
            };
            loop {
                let next = tokio::select! {
                    next = watcher.next() => next,
                    _ = shutdown.changed() => return,
                };
                match next {
                    Ok(batch) => {
                        let revision = {
                            let Ok(mut image) = self.image.write() else {
                                return;
                            };
                            let changed = image.apply(&batch);
                            if changed
                                .iter()
                                .any(|key| image.undecodable().contains_key(key))
                            {
                                self.report_undecodable(&image);
                            }
                            image.revision()
                        };
                        self.image_revision.send_replace(revision);
                    }
                    Err(error) => {
                        self.counters.watch_resumes.fetch_add(1, Ordering::Relaxed);
                        self.store_error("watch stream", &error);
                        self.resync_or_wait(&error, &mut shutdown).await;
                        break;
                    }
                }
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }

    /// After a watch error: re-GET the whole image when the history was compacted, otherwise
    /// wait a moment and let the caller resume from the last revision.
    async fn resync_or_wait(
        &self,
        error: &skiff_meta::Error,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        if matches!(error, skiff_meta::Error::Compacted { .. }) {
            match self.store.get(GetRequest::prefix(self.layout.root())).await {
                Ok(snapshot) => {
                    self.reload(&snapshot);
                    return;
                }
                Err(error) => self.store_error("re-GET after compaction", &error),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY_BACKOFF) => {}
            _ = shutdown.changed() => {}
        }
    }

    async fn control(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut revisions = self.image_revision.subscribe();
        let mut replan_after_revision = 0i64;
        let mut last_rebalance = crate::clock::instant();
        let mut last_shed = crate::clock::instant();
        loop {
            tokio::select! {
                _ = revisions.changed() => {}
                _ = tokio::time::sleep(CONTROLLER_TICK) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
                continue;
            };
            let (revision, controller) = match self.image.read() {
                Ok(image) => (image.revision(), image.controller()),
                Err(_) => return,
            };
            if revision < session.broker_epoch {
                continue; // the image has not seen our own registration yet
            }
            let epoch = self.controller_epoch.lock().ok().and_then(|e| *e);
            match (epoch, controller) {
                (None, None) => {
                    self.campaign(session).await;
                    continue;
                }
                (None, Some(_)) => continue,
                (Some(epoch), current) if current != Some((self.node_id, epoch)) => {
                    if revision >= epoch {
                        self.step_down(epoch, "the controller key is no longer ours");
                    }
                    continue;
                }
                (Some(_), _) => {}
            }
            let Some(epoch) = epoch else { continue };
            if revision < replan_after_revision {
                continue;
            }
            let limits = PlanLimits {
                unclean_leader_election_default: self.unclean_leader_election_default,
                ..PlanLimits::default()
            };
            let mut writes = match self.image.read() {
                Ok(image) => controller::plan(&image, epoch, limits),
                Err(_) => return,
            };
            if let Some((interval, percentage)) = self.rebalance {
                // Only on a settled store: elections and shrinks come first.
                if writes.is_empty() && last_rebalance.elapsed() >= interval {
                    last_rebalance = crate::clock::instant();
                    writes = match self.image.read() {
                        Ok(image) => controller::rebalance(&image, epoch, limits, percentage),
                        Err(_) => return,
                    };
                }
            }
            if writes.is_empty() {
                // Bundle records and moves in progress, on a settled store.
                let now_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
                writes = match self.image.read() {
                    Ok(image) => skiff_cluster::bundles::plan(&image, epoch, now_ms),
                    Err(_) => return,
                };
            }
            if writes.is_empty() {
                writes = self.shed_if_due(epoch, &mut last_shed);
            }
            for write in writes {
                self.counters
                    .controller_writes
                    .fetch_add(1, Ordering::Relaxed);
                match self.store.txn(write.txn).await {
                    Ok(response) => {
                        replan_after_revision = replan_after_revision.max(response.revision);
                        if !response.succeeded {
                            self.counters
                                .controller_writes_refused
                                .fetch_add(1, Ordering::Relaxed);
                            tracing::info!(
                                reason = ?write.reason,
                                epoch,
                                revision = response.revision,
                                "controller write refused"
                            );
                            if !self.still_controller(epoch).await {
                                self.step_down(epoch, "a fenced write failed");
                                break;
                            }
                        } else if write.reason == WriteReason::UncleanElection {
                            self.counters.unclean_leader_elections.fetch_add(
                                u64::try_from(write.partitions.len()).unwrap_or(u64::MAX),
                                Ordering::Relaxed,
                            );
                            tracing::warn!(
                                partitions = ?write.partitions,
                                epoch,
                                "unclean leader election: no ISR member runs, a replica outside \
                                 the ISR now leads (acknowledged records it lacks are lost)"
                            );
                        } else {
                            tracing::info!(
                                reason = ?write.reason,
                                partitions = write.partitions.len(),
                                epoch,
                                revision = response.revision,
                                "controller write"
                            );
                        }
                    }
                    Err(error) => {
                        self.store_error("controller write", &error);
                        break;
                    }
                }
            }
        }
    }

    /// One shedding cycle when shedding is on and its interval has passed since the last: the
    /// writes that start its moves and splits.
    fn shed_if_due(&self, epoch: i64, last_shed: &mut std::time::Instant) -> Vec<ControllerWrite> {
        let Ok(mut shedding) = self.shedding.lock() else {
            return Vec::new();
        };
        let interval = Duration::from_millis(shedding.interval_ms);
        if !shedding.enabled || last_shed.elapsed() < interval {
            return Vec::new();
        }
        *last_shed = crate::clock::instant();
        let now_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
        match self.image.read() {
            Ok(image) => shedding.cycle(&image, epoch, now_ms, &self.shedding_counters),
            Err(_) => Vec::new(),
        }
    }

    /// The cluster-wide bundle map of this broker's image, with the last shedding cycle when it
    /// is the controller.
    pub(crate) fn bundles_view(&self) -> Option<shedding::BundlesView> {
        let bundles = self.with_image(shedding::bundle_views)?;
        Some(shedding::BundlesView {
            bundles,
            cycle: self.last_shedding_cycle(),
            controller: self.controller_id(),
        })
    }

    /// The last shedding cycle this broker ran as controller (empty elsewhere).
    pub(crate) fn last_shedding_cycle(&self) -> Option<shedding::LastCycle> {
        if !self.is_controller() {
            return None;
        }
        self.shedding.lock().ok().map(|s| s.last.clone())
    }

    async fn campaign(&self, session: Session) {
        let txn = membership::campaign(
            &self.layout,
            self.node_id,
            session.broker_epoch,
            session.lease,
        );
        match self.store.txn(txn).await {
            Ok(response) => match membership::campaign_outcome(&response) {
                Ok(Campaign::Won { controller_epoch }) => {
                    self.counters
                        .controller_terms_won
                        .fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut epoch) = self.controller_epoch.lock() {
                        *epoch = Some(controller_epoch);
                    }
                    tracing::info!(controller_epoch, "became the controller");
                }
                Ok(Campaign::Lost { .. }) => {}
                Err(error) => tracing::warn!(%error, "campaign answer unreadable"),
            },
            Err(skiff_meta::Error::LeaseNotFound { .. }) => self.lose_session(),
            Err(error) => self.store_error("campaign", &error),
        }
    }

    async fn still_controller(&self, epoch: i64) -> bool {
        match self
            .store
            .get(GetRequest::key(self.layout.key(&Key::Controller)))
            .await
        {
            Ok(response) => response
                .kvs
                .first()
                .is_some_and(|kv| kv.create_revision == epoch),
            Err(error) => {
                self.store_error("controller check", &error);
                false
            }
        }
    }

    fn step_down(&self, epoch: i64, why: &str) {
        if let Ok(mut current) = self.controller_epoch.lock() {
            if *current == Some(epoch) {
                *current = None;
                tracing::warn!(
                    controller_epoch = epoch,
                    "stepped down as controller: {why}"
                );
            }
        }
    }

    /// Claims a block of producer ids starting at `at_least` or above, unique across the cluster
    /// (compare-and-set on `R/ids/producer_id_block`, re-read and retried when another broker
    /// raced it). Durable in the store before it returns.
    pub async fn claim_producer_id_block(
        &self,
        at_least: i64,
    ) -> Result<(i64, i64), skiff_meta::Error> {
        const ATTEMPTS_MAX: usize = 16;
        let key = self.layout.key(&Key::ProducerIdBlock);
        let mut last = None;
        for _ in 0..ATTEMPTS_MAX {
            let current = self.store.get(GetRequest::key(key.clone())).await?;
            let seen = membership::producer_id_block_of(current.kvs.first())
                .map_err(|error| skiff_meta::Error::InvalidArgument(error.to_string()))?;
            let (txn, block) =
                membership::claim_producer_id_block(&self.layout, seen.as_ref(), at_least);
            let response = self.store.txn(txn).await?;
            if response.succeeded {
                return Ok(block);
            }
            last = Some(block);
        }
        Err(skiff_meta::Error::Unavailable {
            reason: format!(
                "the producer-id block key kept changing under {ATTEMPTS_MAX} claims (last try {last:?})"
            ),
        })
    }

    /// Writes this broker's load report (placement's figures and its traffic over the last
    /// sampling interval) to `R/load/<id>` on its session lease when
    /// `skiff_cluster::load::report_due` says so (or when the lease changed since the last one:
    /// the old key died with the old lease).
    pub async fn publish_load(
        &self,
        report: skiff_placement::LoadReport,
        traffic: skiff_cluster::records::TrafficRecord,
        now_ms: u64,
    ) {
        let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
            return;
        };
        let record = skiff_cluster::records::LoadRecord {
            report,
            write_capacity_bytes_per_second: 0,
            sample_ms: now_ms,
            traffic,
        };
        let last = self.last_load.lock().ok().and_then(|last| last.clone());
        let last_record = last
            .as_ref()
            .filter(|(_, lease)| *lease == session.lease)
            .map(|(record, _)| record);
        if !skiff_cluster::load::report_due(last_record, &record) {
            return;
        }
        let txn =
            skiff_cluster::load::put_report(&self.layout, self.node_id, &record, session.lease);
        match self.store.txn(txn).await {
            Ok(_) => {
                if let Ok(mut last) = self.last_load.lock() {
                    *last = Some((record, session.lease));
                }
            }
            Err(error) => self.store_error("load report", &error),
        }
    }

    /// Controlled shutdown (docs/design/cluster.md §3): marks this broker's registration
    /// `shutting_down` (a Txn guarded on its own session), then waits until its image shows it
    /// leads no partition another running ISR member could lead (the controller moves them, at
    /// epoch + 1) or `timeout` passes. The broker keeps serving meanwhile. Returns at once when no
    /// other broker runs (a cluster of one: nothing can move). Never fails: a shutdown goes on
    /// regardless.
    pub async fn controlled_shutdown(&self, timeout: Duration) {
        let started = crate::clock::instant();
        let alone = self
            .with_image(|image| {
                !image
                    .brokers()
                    .keys()
                    .any(|id| *id != self.node_id && image.is_running(*id))
            })
            .unwrap_or(true);
        if alone {
            return;
        }
        let outcome = tokio::time::timeout(timeout, self.hand_over_leaderships()).await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match outcome {
            Ok(Ok(())) => tracing::info!(elapsed_ms, "controlled shutdown: leads nothing movable"),
            Ok(Err(why)) => tracing::warn!(elapsed_ms, "controlled shutdown skipped: {why}"),
            Err(_) => {
                let left = self
                    .with_image(|image| controller::movable_leaderships(image, self.node_id))
                    .unwrap_or_default();
                tracing::warn!(
                    elapsed_ms,
                    partitions = ?left,
                    "controlled shutdown timed out (skiff.controlled.shutdown.timeout.ms) with \
                     leaderships left; they fail over when the session ends"
                );
            }
        }
    }

    async fn hand_over_leaderships(&self) -> Result<(), String> {
        let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
            return Err("no session".into());
        };
        self.shutting_down.store(true, Ordering::Relaxed);
        let txn = membership::begin_controlled_shutdown(
            &self.layout,
            &self.registration_now(),
            session.lease,
            session.broker_epoch,
        );
        let written_at = loop {
            match self.store.txn(txn.clone()).await {
                Ok(response) if response.succeeded => break response.revision,
                Ok(_) => return Err("the registration is no longer this session's".into()),
                Err(error) => {
                    self.store_error("controlled shutdown", &error);
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        };
        let mut revisions = self.image_revision.subscribe();
        loop {
            let done = self
                .with_image(|image| {
                    image.revision() >= written_at
                        && controller::movable_leaderships(image, self.node_id).is_empty()
                })
                .unwrap_or(true);
            if done {
                return Ok(());
            }
            if revisions.changed().await.is_err() {
                return Err("the image is no longer followed".into());
            }
        }
    }

    /// Ends the session at a clean shutdown: the registration (and the controller key, if held)
    /// go at once instead of after the session timeout.
    pub async fn leave(&self) {
        let session = self.session.lock().ok().and_then(|mut s| s.take());
        if let Some(session) = session {
            if let Err(error) = self.store.lease_revoke(session.lease).await {
                self.store_error("leaving (lease revoke)", &error);
            }
        }
    }

    /// The cluster figures in Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        let (brokers, revision, partitions, offline) = self
            .image
            .read()
            .map(|image| {
                (
                    image.brokers().len(),
                    image.revision(),
                    image.all_partitions().count(),
                    image.offline_partitions(),
                )
            })
            .unwrap_or_default();
        // Kafka reports OfflinePartitionsCount on the active controller only, so that a sum over
        // the brokers counts each partition once.
        let offline = if self.is_controller() { offline } else { 0 };
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
        let shed = &self.shedding_counters;
        let placement_counters = [
            (
                "skiff_placement_shed_cycles_total",
                "Shedding cycles this broker ran as controller.",
                &shed.cycles,
            ),
            (
                "skiff_placement_planned_moves_total",
                "Bundle moves the shedder planned (dry runs included).",
                &shed.planned,
            ),
            (
                "skiff_placement_moves_total",
                "Bundle moves started (persisted as assigning) by this broker as controller.",
                &shed.started,
            ),
            (
                "skiff_placement_moves_refused_total",
                "Planned bundle moves not started: cooldown, a would-be ping-pong, the cycle's \
                 maximum, or a bundle no longer its source's.",
                &shed.refused,
            ),
            (
                "skiff_placement_ping_pong_total",
                "Bundle moves started that sent a bundle straight back where its last move took \
                 it from (returns within the cooldown are refused instead).",
                &shed.ping_pong,
            ),
            (
                "skiff_placement_splits_total",
                "Bundle splits (metadata only) written by this broker as controller.",
                &shed.splits,
            ),
        ];
        let mut out = crate::metrics::Exposition::default();
        for (name, help, value) in counters.into_iter().chain(placement_counters) {
            out.counter(name, help, value.load(Ordering::Relaxed));
        }
        let gauges = [
            (
                "skiff_cluster_brokers",
                "Live brokers in this broker's image.",
                brokers as i64,
            ),
            (
                "skiff_cluster_partitions",
                "Partition states in this broker's image.",
                partitions as i64,
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
                revision,
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
        let (led, replicated) = self
            .with_image(|image| {
                let mut led: BTreeMap<i32, i64> =
                    image.brokers().keys().map(|id| (*id, 0)).collect();
                let mut replicated = led.clone();
                for (_, _, state) in image.all_partitions() {
                    *led.entry(state.value.leader).or_default() += 1;
                    for replica in &state.value.replicas {
                        *replicated.entry(*replica).or_default() += 1;
                    }
                }
                led.remove(&skiff_cluster::records::NO_LEADER);
                (led, replicated)
            })
            .unwrap_or_default();
        let by_broker = |counts: BTreeMap<i32, i64>| {
            counts
                .into_iter()
                .map(|(id, count)| (id.to_string(), count))
                .collect::<Vec<_>>()
        };
        out.labelled_gauges(
            "skiff_cluster_partitions_led",
            "Partitions each broker leads, in this broker's image.",
            "broker",
            by_broker(led),
        );
        out.labelled_gauges(
            "skiff_cluster_partitions_replicated",
            "Partition replicas each broker holds, in this broker's image.",
            "broker",
            by_broker(replicated),
        );
        if let Some(cycle) = self.last_shedding_cycle() {
            let by = |value: fn(&shedding::ScoredBroker) -> f64| {
                cycle
                    .brokers
                    .iter()
                    .map(|b| (b.broker.to_string(), value(b).round() as i64))
                    .collect::<Vec<_>>()
            };
            out.labelled_gauges(
                "skiff_placement_broker_load_bytes_per_second",
                "Each broker's load (bytes in from clients plus replication bytes in, per \
                 second) as the controller saw it at its last shedding cycle.",
                "broker",
                by(|b| b.load_bytes_per_second),
            );
            out.labelled_gauges(
                "skiff_placement_broker_score_percent",
                "Each broker's shedder score at the controller's last shedding cycle.",
                "broker",
                by(|b| b.score_pct),
            );
        }
        let bundles = self
            .with_image(|image| {
                let mut by_owner: BTreeMap<i32, i64> = BTreeMap::new();
                for record in image.bundles().values() {
                    *by_owner.entry(record.value.owner).or_default() += 1;
                }
                by_owner
            })
            .unwrap_or_default();
        out.labelled_gauges(
            "skiff_placement_bundles_owned",
            "Bundles each broker owns, in this broker's image.",
            "broker",
            by_broker(bundles),
        );
        out.into_text()
    }
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
