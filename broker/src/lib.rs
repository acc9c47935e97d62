//! Skiff's broker: the tokio edge that glues the sans-IO protocol core, the storage engine and the
//! pure placement and group state machines to sockets, files and the clock.
//!
//! Must never: put protocol logic (wire layouts, conversion rules) here — that lives in
//! `skiff-protocol` — or read the clock anywhere but [`context`]'s `now_ms` and the server's timers.

pub mod acl;
pub mod config;
mod connection;
mod context;
mod conversion;
pub mod group;
pub mod group_driver;
mod handlers;
pub mod load_sampler;
mod maintenance;
pub mod metadata_store;
pub mod metrics;
mod metrics_http;
pub mod placement;
mod placement_state;
pub mod producer_state;
pub mod sasl;
mod send;
mod server;
pub mod session;
pub mod topic_config;
pub mod topics;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};

use crate::config::Config;
use crate::context::Ctx;
use crate::metadata_store::FileMetadataStore;
use crate::topics::Topics;

/// Why the broker could not start or stopped with an error.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A bad configuration.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The data directory could not be opened or recovered.
    #[error("storage: {0}")]
    Storage(String),
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
    listener: TcpListener,
}

/// Ceiling on all request frames held in memory at once, across connections.
pub const QUEUED_REQUEST_BYTES_MAX: usize = 512 * 1024 * 1024;

impl Broker {
    /// Opens the data directory (recovering it if the last stop was not clean), loads the topics and
    /// binds the first listener.
    pub async fn start(config: Config) -> Result<Self, BrokerError> {
        config.validate()?;
        let acl = acl::load_at_start(&config)?;
        let config = Arc::new(config);
        let address = *config
            .listener_addresses()?
            .first()
            .ok_or_else(|| BrokerError::Storage("no listener".into()))?;
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| BrokerError::Bind { address, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| BrokerError::Bind { address, source })?;
        let (advertised_host, advertised_port) = config.advertised_address(bound)?;
        let log_dir_path = config.log_dirs.clone();
        let open_config = config.clone();
        let group_config = group_driver::group_config(&config, &advertised_host, advertised_port);
        let (topics, group_driver, groups) = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&log_dir_path).map_err(|error| {
                BrokerError::Storage(format!("creating {}: {error}", log_dir_path.display()))
            })?;
            let log_dir =
                skiff_storage::LogDir::open(&log_dir_path, skiff_storage::LogConfig::default())
                    .map_err(|error| BrokerError::Storage(error.to_string()))?;
            // Before the topics take the log directory: the offsets log lives in it too, but has
            // no topic record, so Metadata never lists it.
            let (group_driver, groups) =
                group_driver::GroupDriver::open(&log_dir, &log_dir_path, group_config)
                    .map_err(|error| BrokerError::Storage(error.to_string()))?;
            let topics = Topics::open(
                open_config,
                log_dir,
                Box::new(FileMetadataStore::new(&log_dir_path)),
            )
            .map_err(|error| BrokerError::Storage(error.to_string()))?;
            Ok::<_, BrokerError>((topics, group_driver, groups))
        })
        .await
        .map_err(|error| BrokerError::Storage(error.to_string()))??;
        let request_bytes_budget =
            Semaphore::new(QUEUED_REQUEST_BYTES_MAX.max(config.socket_request_max_bytes as usize));
        let placement =
            placement_state::PlacementState::new(config.node_id, &config.log_dirs, &topics.all())
                .map_err(|error| BrokerError::Storage(format!("placement: {error}")))?;
        let ctx = Arc::new(Ctx {
            config: config.clone(),
            placement,
            topics,
            metrics: Arc::new(metrics::Metrics::default()),
            request_bytes_budget,
            data_arrived: Notify::new(),
            advertised_host,
            advertised_port,
            cluster_id: "skiff-single-node".to_owned(),
            groups,
            shutdown: tokio::sync::watch::channel(false).0,
            acl,
        });
        acl::spawn_reload(&ctx);
        tokio::spawn(group_driver.run(Arc::downgrade(&ctx)));
        if let Some(metrics_address) = &config.metrics_listener {
            let address: std::net::SocketAddr = metrics_address.parse().map_err(|_| {
                BrokerError::Storage(format!("bad metrics address {metrics_address}"))
            })?;
            let metrics_listener = TcpListener::bind(address)
                .await
                .map_err(|source| BrokerError::Bind { address, source })?;
            let metrics_bound = metrics_listener
                .local_addr()
                .map_err(|source| BrokerError::Bind { address, source })?;
            tokio::spawn(metrics_http::serve(metrics_listener, ctx.clone()));
            tracing::info!(%metrics_bound, "metrics endpoint started");
            // Before the listening line, which ends the start-up output scripts wait for.
            println!("skiff metrics on {metrics_bound}");
        }
        tracing::info!(%bound, data = %config.log_dirs.display(), "broker started");
        // A plain line on stdout, so scripts and tests that started the broker on port 0 learn the port.
        println!("skiff listening on {bound}");
        Ok(Self { ctx, listener })
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The broker's figures, readable while it runs.
    pub fn metrics(&self) -> MetricsHandle {
        self.ctx.metrics.clone()
    }

    /// Serves until `shutdown` resolves, drains connections, then flushes every log and writes the
    /// clean-shutdown marker.
    pub async fn serve_until(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), BrokerError> {
        let ctx = self.ctx.clone();
        let maintenance = tokio::spawn(maintenance::run(ctx.clone(), ctx.shutdown.subscribe()));
        server::serve(self.listener, ctx.clone(), shutdown).await;
        let _ = maintenance.await;
        tokio::task::spawn_blocking(move || ctx.topics.close())
            .await
            .map_err(|error| BrokerError::Storage(error.to_string()))?
            .map_err(|error| BrokerError::Storage(error.to_string()))?;
        tracing::info!("clean shutdown");
        Ok(())
    }
}

/// A broker's figures, shared with the running broker.
pub type MetricsHandle = Arc<metrics::Metrics>;
