//! Helpers for cross-crate scenarios: an in-process broker on 127.0.0.1 with a port it picks
//! itself and a temporary data directory, and deterministic v2 batches to produce into it.

use std::net::SocketAddr;

pub mod corpus;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{decode_fetch, Connection};

use skiff_broker::config::Config;
use skiff_broker::{Broker, MetricsHandle};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;
use tokio::sync::oneshot;

/// A broker running inside the test process.
pub struct TestBroker {
    /// Where it listens (the first listener).
    pub address: SocketAddr,
    /// Every listener's name and address.
    pub listeners: Vec<(String, SocketAddr)>,
    /// Its figures.
    pub metrics: MetricsHandle,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The data directory when the broker owns it (`None`: the caller's, kept after the stop).
    _data: Option<tempfile::TempDir>,
}

impl TestBroker {
    /// Starts a broker with `overrides` (`key=value`) on a free port.
    pub async fn start(overrides: &[&str]) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let mut broker = Self::start_in(data.path(), overrides).await?;
        broker._data = Some(data);
        Ok(broker)
    }

    /// Starts a broker with `overrides` on a free port, with its data in `dir` (kept after the
    /// stop, so a test can start it again or look inside).
    pub async fn start_in(dir: &std::path::Path, overrides: &[&str]) -> anyhow::Result<Self> {
        let mut config = Config::default();
        config.apply_override(&format!("log.dirs={}", dir.display()))?;
        config.apply_override("listeners=PLAINTEXT://127.0.0.1:0")?;
        for item in overrides {
            config.apply_override(item)?;
        }
        let broker = Broker::start(config).await?;
        let address = broker.local_addr()?;
        let listeners = broker.listener_addrs()?;
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
            listeners,
            metrics,
            stop: Some(stop),
            task: Some(task),
            _data: None,
        })
    }

    /// The address of the listener named `name`; panics if there is none (a test bug).
    pub fn listener(&self, name: &str) -> SocketAddr {
        self.listeners
            .iter()
            .find(|(listener, _)| listener == name)
            .map(|(_, address)| *address)
            .unwrap_or_else(|| panic!("no listener {name} in {:?}", self.listeners))
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

/// A topic name as kafka-protocol spells it.
pub fn topic_name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

/// Creates a one-partition topic with `configs` (CreateTopics v4); fails unless the broker agrees.
pub async fn create_topic(
    client: &mut Connection,
    topic: &str,
    configs: &[(&str, &str)],
) -> anyhow::Result<()> {
    let configs = configs
        .iter()
        .map(|(key, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string((*key).to_owned()))
                .with_value(Some(StrBytes::from_string((*value).to_owned())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(configs)]);
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 4, &request).await?;
    anyhow::ensure!(
        response.topics[0].error_code == 0,
        "create {topic}: {:?}",
        response.topics[0]
    );
    Ok(())
}

/// Produces `record_count` uncompressed records to partition 0 of `topic`, `records_per_batch`
/// records of `value_bytes` each per batch, one Produce per batch.
pub async fn produce_records(
    client: &mut Connection,
    topic: &str,
    record_count: usize,
    records_per_batch: usize,
    value_bytes: usize,
) -> anyhow::Result<()> {
    for first in (0..record_count).step_by(records_per_batch) {
        let records = batch(first, records_per_batch, value_bytes, Compression::None);
        client
            .produce(topic, 0, bytes::Bytes::from(records))
            .await?;
    }
    Ok(())
}

/// Sends a Fetch at `version` and decodes its answer.
pub async fn fetch(
    client: &mut Connection,
    version: i16,
    request: &FetchRequest,
) -> anyhow::Result<FetchResponse> {
    client.send(ApiKey::Fetch, version, request).await?;
    let size = client.read_size().await?;
    let body = client.read_body(size).await?;
    decode_fetch(body, version)
}

/// The version range ApiVersions advertised for `api_key`; panics if it is not advertised.
pub fn advertised(
    response: &kafka_protocol::messages::ApiVersionsResponse,
    api_key: ApiKey,
) -> std::ops::RangeInclusive<i16> {
    let entry = response
        .api_keys
        .iter()
        .find(|entry| entry.api_key == api_key as i16)
        .unwrap_or_else(|| panic!("{api_key:?} is not advertised"));
    entry.min_version..=entry.max_version
}
