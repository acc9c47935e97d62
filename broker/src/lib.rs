//! Skiff's broker: the tokio edge around the pure crates. It owns everything that touches
//! sockets, files and the clock, and carries out what the pure cores decide: `skiff-protocol`
//! (wire layouts, conversion), `skiff-storage` (the logs), `skiff-cluster` (metadata decisions,
//! the replica state machine), `skiff-meta` (the metadata store), `skiff-placement` and
//! `skiff-group` (the group coordinator).
//!
//! This file owns start-up and shutdown: the order in which the data directory, the metadata
//! store, the topics, the group driver and the listeners come up (the broker listens before its
//! partitions are recovered), and the drain, checkpoints and clean-shutdown marker on the way
//! down.
//!
//! Layout (docs/architecture.md has the map; each module's own doc says what it owns and must
//! never do). Leaves, which import nothing of the request path:
//! - [`config`]: every key, its default and bound, parsed once at load;
//! - `metrics`: counters, gauges and histograms; other folders register their sections in it;
//! - `clock`: the broker's clock readings;
//! - `response`: the response plan (`ResponsePart`) and legacy responses (`LegacyResponse`), whose
//!   record sets are converted at their turn on the wire.
//!
//! Above them:
//! - [`security`]: the session (principal, listener, protocol), SASL mechanisms and ACLs;
//! - [`net`]: the accept loop and admission, one task per connection, writing the plan
//!   (sendfile, TLS, converted chunks), frame capture;
//! - `handlers`: one file per Kafka API, the one dispatch `match`, and `handlers/common/` for
//!   what several handlers share (a handler imports no other handler);
//! - [`partition`]: topics and their logs; `Partition`, which owns the write path and the
//!   high-watermark ritual (append as leader, answer a follower, poll on the timer, wake the
//!   fetches waiting on it); topic configs, producer state, traffic;
//! - [`replication`]: the driver feeding replicas the store's states and timers, the follower's
//!   fetcher, the reassignment throttle;
//! - [`group`]: the driver of `skiff-group`'s coordinator (offsets logs);
//! - [`txn`]: the driver of `skiff-txn`'s transaction coordinator (`__transaction_state`,
//!   producer-id blocks) and the marker writer;
//! - [`interbroker`]: the client for requests to other brokers (markers, transaction checks);
//! - `txn_verify`: KIP-890's check of a transactional Produce with its coordinator;
//! - [`cluster`]: membership, the controller loop, topic creation and changes, the
//!   materializer, ISR writes, elections, reassignments, shedding;
//! - [`placement`]: the load sampler and placement state over `skiff-placement`;
//! - [`ops`]: the operator HTTP endpoint and maintenance (retention, flush, checkpoints, load
//!   reports);
//! - `context`: `Ctx`, what the request path shares.
//!
//! No folder imports a folder that imports it back (`scripts/import-cycles.py`, in CI).
//!
//! Must never: put protocol logic (wire layouts, conversion rules) or a decision that a pure
//! crate owns here; read the wall clock anywhere but `clock`.

// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

mod clock;
pub mod cluster;
pub mod config;
mod context;
mod dynamic;
pub mod group;
mod handlers;
pub mod interbroker;
pub mod metrics;
pub mod net;
pub mod ops;
pub mod partition;
pub mod placement;
mod quota;
pub mod replication;
mod response;
pub mod security;
pub mod tls;
pub mod txn;
mod txn_verify;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::context::Ctx;
use crate::net::server;
use crate::ops::maintenance;
use crate::partition::materialized::MaterializedTopicsFile;
use crate::partition::topics::Topics;
use crate::security::{acl, sasl};

/// Why the broker could not start or stopped with an error.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A bad configuration.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The data directory (`log.dirs`) could not be created.
    #[error("cannot create the data directory {path}: {source}")]
    DataDirectory {
        /// The directory.
        path: std::path::PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The log directory could not be opened or recovered.
    #[error("storage: {0}")]
    Storage(#[from] skiff_storage::Error),
    /// The topics (their metadata or their logs) could not be opened or closed.
    #[error("topics: {0}")]
    Topics(#[from] partition::topics::TopicError),
    /// The group coordinator's offsets log could not be opened.
    #[error("group coordinator: {0}")]
    Groups(#[from] group::driver::GroupDriverError),
    /// The transaction coordinator could not start.
    #[error("transaction coordinator: {0}")]
    Transactions(#[from] txn::driver::TxnDriverError),
    /// The placement state could not be built from the topics.
    #[error("placement: {0}")]
    Placement(#[from] skiff_placement::PlacementError),
    /// Cluster membership (the metadata store, the node identity, the registration).
    #[error("cluster: {0}")]
    Cluster(#[from] cluster::ClusterError),
    /// A blocking start-up or shutdown task panicked or was cancelled.
    #[error("a start-up or shutdown task did not finish: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// `skiff.frame.capture.dir` could not be created.
    #[error("{0}")]
    FrameCapture(#[from] net::frame_capture::CaptureDirError),
    /// The log cleaner could not be started.
    #[error("{0}")]
    Cleaner(#[from] ops::cleaner::CleanerStartError),
    /// The listener could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: std::net::SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
}

/// A started broker: data opened, listener bound.
pub struct Broker {
    ctx: Arc<Ctx>,
    listeners: Vec<server::BoundListener>,
    connection_limits: net::admission::ConnectionLimits,
}

/// Before the group coordinator serves: a data directory that kept every group's offsets in
/// one single-node log gets `__consumer_offsets` (if the store has none yet) and each group's
/// offsets copied into its own partition, once.
async fn migrate_single_node_offsets(
    ctx: &Arc<Ctx>,
    files: skiff_storage::DurableFiles,
) -> Result<(), BrokerError> {
    let data_dir = ctx.config.log_dirs.clone();
    let (topics, checking_files, checking_dir) =
        (ctx.topics.clone(), files.clone(), data_dir.clone());
    let pending = tokio::task::spawn_blocking(move || {
        group::driver::single_node_offsets_pending(&topics, &checking_files, &checking_dir)
    })
    .await??;
    if !pending {
        return Ok(());
    }
    ctx.topic_creation().ensure_offsets_topic().await?;
    let topics = ctx.topics.clone();
    let migrated = tokio::task::spawn_blocking(move || {
        group::driver::migrate_single_node_offsets(&topics, &files, &data_dir)
    })
    .await??;
    tracing::info!(
        copied = migrated.copied,
        elsewhere = migrated.elsewhere,
        "single-node offsets log migrated into the {} partitions",
        skiff_cluster::topics::OFFSETS_TOPIC
    );
    Ok(())
}

/// The coordinator tasks and their handles, opened with the data directory.
struct Coordinators {
    group: (group::driver::GroupDriver, group::driver::GroupHandle),
    txn: (txn::driver::TxnDriver, txn::driver::TxnHandle),
}

impl Coordinators {
    /// Opens both coordinator tasks (blocking: the transaction coordinator reads the legacy
    /// producer-id checkpoint).
    fn open(log_dir: &skiff_storage::LogDir, config: &Config) -> Result<Self, BrokerError> {
        let timeout_ms = config.offsets_commit_timeout_ms;
        let group_config = group::driver::group_config(config);
        let txn_config = txn::driver::txn_config(config);
        Ok(Self {
            group: group::driver::GroupDriver::open(group_config, timeout_ms),
            txn: txn::driver::TxnDriver::open(log_dir, &config.log_dirs, txn_config, timeout_ms)?,
        })
    }
}

/// Starts the group and transaction coordinator tasks (the transaction coordinator's markers go
/// out through the inter-broker client and stop at shutdown).
fn spawn_coordinators(
    ctx: &Arc<Ctx>,
    group_driver: group::driver::GroupDriver,
    txn_driver: txn::driver::TxnDriver,
) {
    tokio::spawn(group_driver.run(
        ctx.topics.clone(),
        ctx.cluster.clone(),
        ctx.isr_proposals.clone(),
    ));
    let markers = txn::markers::MarkerWriter::new(
        ctx.interbroker.clone(),
        ctx.cluster.clone(),
        ctx.shutdown.subscribe(),
    );
    tokio::spawn(txn_driver.run(
        ctx.topics.clone(),
        ctx.cluster.clone(),
        ctx.isr_proposals.clone(),
        markers,
    ));
}

impl Broker {
    /// Opens the data directory (recovering it if the last stop was not clean), loads the topics
    /// and binds the first listener.
    pub async fn start(mut config: Config) -> Result<Self, BrokerError> {
        config.apply_cluster_defaults();
        config.validate()?;
        let connection_limits = connection_limits(&config)?;
        let acl = load_acls(&config)?;
        let config = Arc::new(config);
        let listeners = bind_listeners(&config).await?;
        if listeners.is_empty() {
            return Err(config::ConfigError::InvalidValue {
                key: "listeners".to_owned(),
                reason: "at least one listener is needed".to_owned(),
            }
            .into());
        }
        let log_dir_path = config.log_dirs.clone();
        let open_config = config.clone();
        let (topics, to_migrate, coordinators, files, opened_clean) =
            tokio::task::spawn_blocking(move || {
                std::fs::create_dir_all(&log_dir_path).map_err(|source| {
                    BrokerError::DataDirectory {
                        path: log_dir_path.clone(),
                        source,
                    }
                })?;
                // Recovery waits until the broker listens (`Topics::recover_pending`): partitions
                // not recovered yet answer retriable errors meanwhile.
                let log_dir = skiff_storage::LogDir::open_deferred(
                    &log_dir_path,
                    skiff_storage::LogConfig::default(),
                    open_config.dir_config(),
                )?;
                let coordinators = Coordinators::open(&log_dir, &open_config)?;
                let files = log_dir.files();
                let topics_file = MaterializedTopicsFile::new(&log_dir_path, files.clone());
                topics_file.guard_downgrades(&log_dir)?;
                let opened_clean = log_dir.opened_clean();
                if let Some(damage) = log_dir.checkpoint_damage() {
                    tracing::warn!(
                        %damage,
                        "offset checkpoint unreadable; every partition is recovered from its first segment"
                    );
                }
                let (topics, to_migrate) = Topics::open(open_config, log_dir, topics_file)?;
                Ok::<_, BrokerError>((
                    topics,
                    to_migrate,
                    coordinators,
                    files,
                    opened_clean,
                ))
            })
            .await??;
        let shutdown = tokio::sync::watch::channel(false).0;
        let endpoints = registered_endpoints(&listeners);
        let cluster =
            cluster::Cluster::start(&config, files.clone(), endpoints, shutdown.subscribe())
                .await?;
        if !to_migrate.is_empty() {
            let migrated = cluster.migrate(&to_migrate).await?;
            tracing::info!(
                topics = to_migrate.len(),
                written = migrated,
                "single-node topic registry migrated into the metadata store"
            );
        }
        refuse_cleaner_off_with_compacted_topics(&config, &cluster)?;
        // Serve the topics the store has, with their logs, before the first client comes.
        let topics = Arc::new(topics);
        let feed: cluster::materialize::FeedStates = replication::driver::feed_for_materializer;
        cluster.materialize(&topics, feed).await?;
        if opened_clean {
            // After a clean shutdown nothing needs a scan: the logs are ready in moments, and a
            // client that reconnects at once finds every partition as it left it (as Kafka,
            // which listens only once its logs are loaded). Recovery after a crash is left to
            // the recovery threads once the broker listens.
            // The replicas are fed their states at once too (the materializer left recovering
            // logs unfed): the first client finds each partition led, not NOT_LEADER_OR_FOLLOWER
            // until the replication driver's next pass.
            let (recovering, feeding) = (topics.clone(), cluster.clone());
            tokio::task::spawn_blocking(move || {
                let recovered = recovering.recover_pending()?;
                let fed = replication::driver::feed_states(&recovering, &feeding);
                // Becoming leader or follower proposes no ISR change (only fetches and timers).
                debug_assert!(fed.proposals.is_empty());
                Ok::<_, BrokerError>(recovered)
            })
            .await??;
        }
        tokio::spawn(cluster::materialize::run(
            cluster.clone(),
            topics.clone(),
            feed,
            shutdown.subscribe(),
        ));
        let request_bytes_budget = Semaphore::new(config.queued_max_request_bytes);
        let placement = placement::state::PlacementState::new(config.node_id, &config.log_dirs);
        let (isr_proposals, queued_proposals) = partition::replica::proposal_channel();
        // The sections of `/metrics` beside the broker-wide families register here, once.
        let metrics = Arc::new(metrics::Metrics::default());
        cluster.register_metrics(&metrics);
        replication::register_metrics(&topics, &metrics);
        let quotas = quota::start(&config, &cluster, &metrics, shutdown.subscribe());
        let dynamic = dynamic::start(config.clone(), &cluster, shutdown.subscribe());
        let ctx = Arc::new(Ctx {
            security: load_security(&config, &cluster, acl.as_ref(), &listeners, &shutdown).await?,
            config: config.clone(),
            placement,
            topics,
            metrics,
            request_bytes_budget,
            cluster_id: cluster.cluster_id().to_owned(),
            interbroker: interbroker::InterBrokerClient::for_broker(cluster.clone(), &config),
            cluster,
            groups: coordinators.group.1,
            txns: coordinators.txn.1,
            shutdown,
            isr_proposals,
            acl,
            quotas,
            tls_listeners: listeners
                .iter()
                .filter_map(|bound| bound.tls.clone())
                .collect(),
            dynamic,
        });
        tokio::spawn(tls::live::follow(
            ctx.tls_listeners.clone(),
            ctx.dynamic.subscribe(),
            ctx.shutdown.subscribe(),
        ));
        // (The materializer fed each partition's replica the image before publishing it.)
        tokio::spawn(replication::driver::run(ctx.clone(), queued_proposals));
        migrate_single_node_offsets(&ctx, files).await?;
        spawn_coordinators(&ctx, coordinators.group.0, coordinators.txn.0);
        if let Some(address) = config.metrics_listener {
            let metrics_listener = TcpListener::bind(address)
                .await
                .map_err(|source| BrokerError::Bind { address, source })?;
            let metrics_bound = metrics_listener
                .local_addr()
                .map_err(|source| BrokerError::Bind { address, source })?;
            tokio::spawn(ops::http::serve(metrics_listener, ctx.clone()));
            tracing::info!(%metrics_bound, "metrics endpoint started");
            // Before the listening line, which ends the start-up output scripts wait for.
            println!("skiff metrics on {metrics_bound}");
        }
        // Plain lines on stdout, so scripts and tests that started the broker on port 0 learn the
        // ports; the `skiff listening on` line (the first listener) comes last and ends the output
        // they wait for.
        let mut first_bound = None;
        for bound in &listeners {
            let address = bound
                .listener
                .local_addr()
                .map_err(|source| BrokerError::Bind {
                    address: bound.config.address,
                    source,
                })?;
            first_bound.get_or_insert(address);
            tracing::info!(
                listener = %bound.config.name,
                protocol = %bound.config.protocol,
                %address,
                "listening"
            );
            println!(
                "skiff listener {} ({}) on {address}",
                bound.config.name, bound.config.protocol
            );
        }
        tracing::info!(data = %config.log_dirs.display(), "broker started");
        if let Some(address) = first_bound {
            println!("skiff listening on {address}");
        }
        Ok(Self {
            ctx,
            listeners,
            connection_limits,
        })
    }

    /// The address of the first listener.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listeners
            .first()
            .ok_or_else(|| std::io::Error::other("no listener"))?
            .listener
            .local_addr()
    }

    /// Every listener's name and bound address, in `listeners` order.
    pub fn listener_addrs(&self) -> std::io::Result<Vec<(String, std::net::SocketAddr)>> {
        self.listeners
            .iter()
            .map(|bound| Ok((bound.config.name.clone(), bound.listener.local_addr()?)))
            .collect()
    }

    /// The broker's figures, readable while it runs.
    pub fn metrics(&self) -> MetricsHandle {
        self.ctx.metrics.clone()
    }

    /// Serves until `shutdown` resolves and, in a cluster with `controlled.shutdown.enable`, its
    /// leaderships have moved away (`Cluster::controlled_shutdown`); then drains connections,
    /// leaves the cluster, flushes every log and writes the clean-shutdown marker.
    pub async fn serve_until(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), BrokerError> {
        let ctx = self.ctx.clone();
        let recovering = ctx.topics.clone();
        // Not awaited: shutdown's close waits for it (it holds the log directory).
        drop(tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            match recovering.recover_pending() {
                Ok(0) => {}
                Ok(count) => tracing::info!(
                    partitions = count,
                    elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "partitions recovered"
                ),
                Err(error) => {
                    tracing::error!(%error, "recovering partitions failed; they answer NOT_LEADER_OR_FOLLOWER")
                }
            }
        }));
        let maintenance = tokio::spawn(maintenance::run(ctx.clone(), ctx.shutdown.subscribe()));
        tokio::spawn(dynamic::log_defaults::follow(
            ctx.topics.clone(),
            ctx.cluster.clone(),
            ctx.dynamic.subscribe(),
            ctx.shutdown.subscribe(),
        ));
        let cleaner = ops::cleaner::start(&ctx, &ctx.metrics)?;
        // In a cluster the leaderships move away first, while the broker still serves (clients
        // and followers follow them in moments); alone, this returns at once.
        let (cluster, controlled) = (ctx.cluster.clone(), ctx.config.controlled_shutdown_enable);
        let timeout = std::time::Duration::from_millis(ctx.config.controlled_shutdown_timeout_ms);
        let shutdown = async move {
            shutdown.await;
            if controlled {
                cluster.controlled_shutdown(timeout).await;
            }
        };
        server::serve(
            self.listeners,
            ctx.clone(),
            self.connection_limits,
            shutdown,
        )
        .await;
        let _ = maintenance.await;
        tokio::task::spawn_blocking(move || cleaner.stop_and_join()).await?;
        ctx.cluster.leave().await;
        tokio::task::spawn_blocking(move || ctx.topics.close()).await??;
        tracing::info!("clean shutdown");
        Ok(())
    }
}

/// `log.cleaner.enable=false` (and only it) with a compacted topic in the cluster would leave that topic to grow
/// without bound while it says `compact`: the start stops with an error naming one such topic.
fn refuse_cleaner_off_with_compacted_topics(
    config: &Config,
    cluster: &cluster::Cluster,
) -> Result<(), BrokerError> {
    if config.log_cleaner_enable {
        return Ok(());
    }
    let compacted = cluster
        .with_image(|image| {
            image.topics().iter().find_map(|(name, record)| {
                partition::topic_config::TopicConfig::resolve_named(
                    config,
                    name,
                    &record.value.configs,
                )
                .is_ok_and(|resolved| resolved.cleanup_policy.compact)
                .then(|| name.clone())
            })
        })
        .flatten();
    match compacted {
        None => Ok(()),
        Some(topic) => Err(config::ConfigError::InvalidValue {
            key: "log.cleaner.enable".to_owned(),
            reason: format!(
                "false, but topic {topic} is compacted (cleanup.policy includes compact) and would never be cleaned; remove the key (the cleaner always runs in Kafka 4.1)"
            ),
        }
        .into()),
    }
}

/// A broker's figures, shared with the running broker.
pub type MetricsHandle = Arc<metrics::Metrics>;

/// Raises the open-file limit and checks that it holds `max.connections` (before anything is
/// opened, so a limit that cannot stops the start cleanly).
fn connection_limits(config: &Config) -> Result<net::admission::ConnectionLimits, BrokerError> {
    let (capacity, ceiling) = match net::fd_limit::raise_to_hard_limit() {
        Ok(limit) => {
            tracing::info!(
                soft = limit.soft,
                hard = limit.hard,
                "open-file limit (RLIMIT_NOFILE) in force"
            );
            let ceiling = net::fd_limit::connections_that_fit(config, limit).0;
            (net::fd_limit::connection_capacity(config, limit)?, ceiling)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read the open-file limit; max.connections is unchecked");
            (config.max_connections, usize::MAX)
        }
    };
    Ok(net::admission::ConnectionLimits::new(
        config, capacity, ceiling,
    ))
}

/// Binds every listener of `listeners`, with the TLS acceptor and the SASL credentials their
/// security protocols need (read once, here, so a bad file stops the start with a clear error).
async fn bind_listeners(config: &Config) -> Result<Vec<server::BoundListener>, BrokerError> {
    let listener_configs = config.listener_configs()?;
    let sasl = if listener_configs.iter().any(|l| l.protocol.uses_sasl()) {
        Some(Arc::new(load_sasl(config)?))
    } else {
        None
    };
    let capture = net::frame_capture::FrameCapture::open(config)?;
    let mut bound_listeners = Vec::with_capacity(listener_configs.len());
    for listener_config in listener_configs {
        let address = listener_config.address;
        let listener = server::bind(address, config.socket_listen_backlog_size)
            .map_err(|source| BrokerError::Bind { address, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| BrokerError::Bind { address, source })?;
        bound_listeners.push(server::BoundListener {
            listener,
            advertised: listener_config.advertised_endpoint(bound),
            tls: if listener_config.protocol.uses_tls() {
                Some(Arc::new(tls::live::LiveAcceptor::load(
                    config,
                    &listener_config.name,
                )?))
            } else {
                None
            },
            sasl: sasl
                .clone()
                .filter(|_| listener_config.protocol.uses_sasl()),
            capture: capture.clone(),
            config: listener_config,
        });
    }
    Ok(bound_listeners)
}

/// Starts the mirror of the cluster's ACLs and SCRAM users (importing the files if this broker is
/// the first) and the ACL file's reload task; the sets in force are the store's from here on.
async fn load_security(
    config: &Config,
    cluster: &cluster::ClusterHandle,
    acl: Option<&Arc<acl::AclState>>,
    listeners: &[server::BoundListener],
    shutdown: &tokio::sync::watch::Sender<bool>,
) -> Result<Arc<cluster::security_store::SecurityStore>, BrokerError> {
    let boot = cluster::security_store::SecurityBootstrap {
        acl: acl.cloned(),
        file_acls: acl::spawn_reload(acl, shutdown.subscribe()),
        credentials: listeners
            .iter()
            .find_map(|bound| bound.sasl.as_ref().map(|setup| setup.store.clone())),
        credentials_file: config.sasl_credentials_file.clone(),
    };
    let timeout_ms = config.metadata_start_timeout_ms;
    Ok(cluster::security_store::SecurityStore::start(
        cluster,
        boot,
        timeout_ms,
        shutdown.subscribe(),
    )
    .await?)
}

/// The endpoints a broker registers in the store: each listener's name, advertised address and
/// security protocol.
fn registered_endpoints(
    listeners: &[server::BoundListener],
) -> Vec<skiff_cluster::records::Endpoint> {
    listeners
        .iter()
        .map(|bound| skiff_cluster::records::Endpoint {
            name: bound.config.name.clone(),
            host: bound.advertised.0.clone(),
            port: bound.advertised.1,
            security_protocol: bound.config.protocol.to_string(),
        })
        .collect()
}

/// What authorization is configured with, read from the config here so `security` never reads
/// the config: `None` (authorization off) without `authorizer.class.name` and `skiff.acl.file`.
fn acl_settings(config: &Config) -> Option<acl::AclSettings> {
    if config.authorizer_class_name.trim().is_empty() && config.acl_file.is_none() {
        return None;
    }
    Some(acl::AclSettings {
        path: config.acl_file.clone(),
        super_users: config.super_users.names.clone(),
        allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        reload_interval_ms: config.acl_reload_interval_ms,
    })
}

/// Loads the ACL file at start-up; a file that cannot be loaded is a bad `skiff.acl.file`.
fn load_acls(config: &Config) -> Result<Option<Arc<acl::AclState>>, config::ConfigError> {
    acl::load_at_start(acl_settings(config)).map_err(|error| config::ConfigError::InvalidValue {
        key: "skiff.acl.file".to_owned(),
        reason: error.to_string(),
    })
}

/// Reads the SASL credentials file and the enabled mechanisms.
fn load_sasl(config: &Config) -> Result<server::SaslSetup, BrokerError> {
    let key = "skiff.sasl.credentials.file";
    let bad = |reason: String| {
        BrokerError::Config(config::ConfigError::InvalidValue {
            key: key.to_owned(),
            reason,
        })
    };
    let path = config
        .sasl_credentials_file
        .as_deref()
        .ok_or_else(|| bad("a SASL listener needs it".to_owned()))?;
    let metadata =
        std::fs::metadata(path).map_err(|error| bad(format!("{}: {error}", path.display())))?;
    if metadata.len() > sasl::CREDENTIALS_FILE_BYTES_MAX {
        return Err(bad(format!(
            "{} is larger than {} bytes",
            path.display(),
            sasl::CREDENTIALS_FILE_BYTES_MAX
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|error| bad(format!("{}: {error}", path.display())))?;
    // The secret that derives unknown users' fake credentials: fresh per process, never stored.
    let mut server_secret = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut server_secret);
    let file = sasl::CredentialStore::parse(&text, &server_secret)
        .map_err(|error| bad(format!("{}: {error}", path.display())))?;
    // The file's users are in force until the metadata store's replace them (at once, before
    // the first client: the security store's start imports the file or reads the store's).
    let users = file
        .credentials()
        .map(|(mechanism, user, credential)| ((mechanism, user.to_owned()), credential.clone()))
        .collect();
    let live = sasl::LiveCredentials::new(users, server_secret.to_vec())
        .map_err(|error| bad(format!("{}: {error}", path.display())))?;
    Ok(server::SaslSetup {
        store: Arc::new(live),
        mechanisms: config.sasl_enabled_mechanisms.enabled.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_acl_file_is_refused_with_the_key_named() {
        let directory = tempfile::tempdir().expect("temp dir");
        let mut config = Config::default();
        config
            .apply_override("super.users=User:admin")
            .expect("a super user");
        assert!(load_acls(&config).expect("no file").is_none());
        let path = directory.path().join("acls.txt");
        config.acl_file = Some(path.clone());
        let error = load_acls(&config).expect_err("missing file");
        assert!(error.to_string().contains("skiff.acl.file"), "{error}");
        std::fs::write(&path, "allow User:a read topic:t\n").expect("write");
        let state = load_acls(&config).expect("loads").expect("a set");
        assert!(state.current().authorize(
            &security::session::Principal::user("admin"),
            acl::Operation::Delete,
            acl::ResourceType::Topic,
            "t"
        ));
    }
}
