//! Helpers for cross-crate scenarios: an in-process broker on 127.0.0.1 with a port it picks
//! itself and a temporary data directory, and deterministic v2 batches to produce into it.

use std::net::SocketAddr;

use skiff_broker::config::Config;
use skiff_broker::{Broker, MetricsHandle};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use tokio::sync::oneshot;

/// A broker running inside the test process.
pub struct TestBroker {
    /// Where it listens.
    pub address: SocketAddr,
    /// Its figures.
    pub metrics: MetricsHandle,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _data: tempfile::TempDir,
}

impl TestBroker {
    /// Starts a broker with `overrides` (`key=value`) on a free port.
    pub async fn start(overrides: &[&str]) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut config = Config::default();
        config.apply_override(&format!("log.dirs={}", data.path().display()))?;
        config.apply_override("listeners=PLAINTEXT://127.0.0.1:0")?;
        for item in overrides {
            config.apply_override(item)?;
        }
        let broker = Broker::start(config).await?;
        let address = broker.local_addr()?;
        let metrics = broker.metrics();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = broker
                .serve_until(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            address,
            metrics,
            stop: Some(stop),
            task: Some(task),
            _data: data,
        })
    }

    /// host:port for clients.
    pub fn bootstrap(&self) -> String {
        self.address.to_string()
    }

    /// Stops the broker gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// One v2 batch of `count` records of `value_bytes` each, keys `k<first+i>`.
pub fn batch(first: usize, count: usize, value_bytes: usize, compression: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, compression);
    let value = vec![b'v'; value_bytes];
    for index in 0..count {
        let key = format!("k{}", first + index);
        builder
            .push(&NewRecord {
                offset_delta: i32::try_from(index).unwrap_or(i32::MAX),
                timestamp: 1_700_000_000_000,
                key: Some(key.as_bytes()),
                value: Some(&value),
                headers: &[],
            })
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}
