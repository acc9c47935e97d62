//! A small Kafka client for benchmarks and cross-crate tests: it talks to **any** Kafka-compatible
//! broker by address. Requests are encoded with kafka-protocol's encoders. CreateTopics and Produce
//! responses are decoded with the bounded decoders of [`crate::responses`]; Metadata and the
//! KIP-283 Fetch responses (every version) still go through kafka-protocol's decoders, which must
//! move to bounded code too. Response frames are bounded by [`RESPONSE_BYTES_MAX`] before anything
//! is allocated. A connection runs over plain TCP or TLS
//! ([`Security`]); the Kafka framing above it is the same.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    RequestHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response this client accepts (a Fetch of 250 MB plus headers).
pub const RESPONSE_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Most bytes one read of a response body asks the socket for. Loopback TCP sends its window
/// update only when a `recv` returns, so one `recv` for a whole 12 MB response lets the broker fill
/// its 4 MiB send buffer, then idle while the consumer copies all of it out, then refill: the two
/// take turns instead of overlapping. Reads of this size keep both busy (about +10 % modern fetch
/// on the 2-core bench machine). The loopback baseline reads the same way.
pub const READ_PIECE_BYTES_MAX: usize = 256 * 1024;

/// The byte stream under a connection: a plain TCP socket or TLS over one.
pub trait ByteStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> ByteStream for T {}

/// How a connection reaches the broker's listener.
#[derive(Clone, Default)]
pub enum Security {
    /// A PLAINTEXT listener.
    #[default]
    Plaintext,
    /// An SSL listener, trusting what this client configuration trusts.
    Tls(Arc<rustls::ClientConfig>),
}

/// One connection to a broker.
pub struct Connection {
    stream: Box<dyn ByteStream>,
    correlation_id: i32,
    /// Where each request is encoded, kept for the next: a fresh buffer per request made a 1 MiB
    /// Produce fault its pages in again and copy itself twice, and the client, not the broker,
    /// became the limit of the produce benchmark.
    frame: BytesMut,
    /// The TLS version and cipher suite the handshake settled on (`None` on PLAINTEXT).
    tls_negotiated: Option<String>,
}

/// How long a new topic's partitions may take to get a leader.
const PARTITION_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause between readiness checks of a new topic.
const PARTITION_READY_RETRY: Duration = Duration::from_millis(50);

/// Kafka's retriable "not there yet" errors of a just-created partition: UNKNOWN_TOPIC_OR_PARTITION
/// (3), LEADER_NOT_AVAILABLE (5), NOT_LEADER_OR_FOLLOWER (6).
const PARTITION_NOT_READY_CODES: [i16; 3] = [3, 5, 6];

/// The Fetch version of the readiness check (every Kafka-compatible broker here serves it).
const READINESS_FETCH_VERSION: i16 = 4;

impl Connection {
    /// Connects to a PLAINTEXT listener at `address` (host:port).
    pub async fn connect(address: &str) -> anyhow::Result<Self> {
        Self::connect_with(address, &Security::Plaintext).await
    }

    /// Connects to `address` (host:port) as `security` says; a TLS connection completes its
    /// handshake here, checking the broker's certificate against `address`'s host.
    pub async fn connect_with(address: &str, security: &Security) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        tcp.set_nodelay(true)?;
        let (stream, tls_negotiated): (Box<dyn ByteStream>, _) = match security {
            Security::Plaintext => (Box::new(tcp), None),
            Security::Tls(config) => {
                let name = crate::tls::server_name(address)?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .with_context(|| format!("TLS handshake with {address}"))?;
                let session = tls.get_ref().1;
                let negotiated = format!(
                    "{:?} {:?}",
                    session.protocol_version(),
                    session.negotiated_cipher_suite().map(|suite| suite.suite())
                );
                (Box::new(tls), Some(negotiated))
            }
        };
        Ok(Self {
            stream,
            correlation_id: 0,
            frame: BytesMut::new(),
            tls_negotiated,
        })
    }

    /// The TLS version and cipher suite of this connection's handshake (`None` on PLAINTEXT).
    pub fn tls_negotiated(&self) -> Option<&str> {
        self.tls_negotiated.as_deref()
    }

    /// Sends one request and returns its correlation id, without reading the response.
    pub async fn send<R: Encodable>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &R,
    ) -> anyhow::Result<i32> {
        self.correlation_id += 1;
        encode_request_frame(
            &mut self.frame,
            api_key,
            version,
            self.correlation_id,
            request,
        )?;
        self.stream.write_all(&self.frame).await?;
        // TLS may keep the records of a small write until flushed; plain TCP flushes nothing.
        self.stream.flush().await?;
        Ok(self.correlation_id)
    }

    /// Reads the size prefix of the next response.
    pub async fn read_size(&mut self) -> anyhow::Result<usize> {
        let size = self.stream.read_i32().await?;
        let size = usize::try_from(size).context("negative response size")?;
        if size > RESPONSE_BYTES_MAX {
            bail!("response of {size} bytes is above the client's limit");
        }
        Ok(size)
    }

    /// Reads a whole response body of `size` bytes.
    pub async fn read_body(&mut self, size: usize) -> anyhow::Result<Bytes> {
        let mut body = BytesMut::zeroed(size);
        self.stream.read_exact(&mut body).await?;
        Ok(body.freeze())
    }

    /// Reads and discards `size` bytes in pieces of `piece_bytes`, pausing `pause` between pieces:
    /// a slow reader. Returns the bytes read.
    pub async fn drain_slowly(
        &mut self,
        size: usize,
        piece_bytes: usize,
        pause: Duration,
    ) -> anyhow::Result<usize> {
        let mut buffer = vec![0u8; piece_bytes.max(1)];
        let mut remaining = size;
        while remaining > 0 {
            let want = remaining.min(buffer.len());
            let read = self.stream.read(&mut buffer[..want]).await?;
            if read == 0 {
                bail!("broker closed with {remaining} bytes unread");
            }
            remaining -= read;
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
        Ok(size)
    }

    /// Reads a whole response body of `size` bytes into `buffer` and hands it out as [`Bytes`];
    /// once the caller has dropped every piece of it, the next call reuses the same allocation (a
    /// consumer reading many large responses allocates, and faults in, its buffer once).
    pub async fn read_body_reusing(
        &mut self,
        size: usize,
        buffer: &mut BytesMut,
    ) -> anyhow::Result<Bytes> {
        buffer.clear();
        buffer.reserve(size);
        // Reads into the spare capacity as it is: zero-filling a response-sized buffer first
        // (`resize`) cost the consumer nearly half as much as the receive copy itself.
        while buffer.len() < size {
            let unread = (size - buffer.len()).min(READ_PIECE_BYTES_MAX);
            let mut window = (&mut *buffer).limit(unread);
            if self.stream.read_buf(&mut window).await? == 0 {
                bail!(
                    "the connection closed {} bytes into a {size}-byte response",
                    buffer.len()
                );
            }
        }
        Ok(buffer.split().freeze())
    }

    /// Sends a request and decodes its response.
    pub async fn request<R: Encodable, S: Decodable>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &R,
    ) -> anyhow::Result<S> {
        let correlation_id = self.send(api_key, version, request).await?;
        self.receive(api_key, version, correlation_id).await
    }

    /// Reads the next response frame whole (after its size prefix), for the bounded decoders of
    /// [`crate::responses`].
    pub async fn receive_frame(&mut self) -> anyhow::Result<Bytes> {
        let size = self.read_size().await?;
        self.read_body(size).await
    }

    /// Reads and decodes the next response, which must carry `correlation_id` (requests sent with
    /// [`Connection::send`] are answered in order, so several may be in flight).
    pub async fn receive<S: Decodable>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
    ) -> anyhow::Result<S> {
        let size = self.read_size().await?;
        let mut body = self.read_body(size).await?;
        let row = skiff_protocol::api::supported(api_key).context("unsupported api")?;
        let got = body.get_i32();
        if got != correlation_id {
            bail!("correlation id {got}, expected {correlation_id}");
        }
        if row.response_header_version(version) >= 1 {
            // Tagged fields of the response header: a count we expect to be zero.
            let count = body.get_u8();
            if count != 0 {
                bail!("unexpected response header tagged fields");
            }
        }
        let crate_version = skiff_protocol::api::response_crate_version(api_key, version);
        S::decode(&mut body, crate_version).context("decoding response")
    }

    /// Metadata for `topics` (auto-creating them on brokers that allow it).
    pub async fn metadata(&mut self, topics: &[&str]) -> anyhow::Result<MetadataResponse> {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        let request = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|name| {
                        MetadataRequestTopic::default().with_name(Some(
                            kafka_protocol::messages::TopicName(StrBytes::from_string(
                                (*name).to_owned(),
                            )),
                        ))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(true);
        self.request(ApiKey::Metadata, 4, &request).await
    }

    /// Waits until every partition of the just-created `topic` answers a Fetch (v4, offset 0, no
    /// wait) without a "not there yet" error. A broker with a separate controller (Apache Kafka)
    /// acknowledges CreateTopics before the partitions have a leader; producing or timing then
    /// would measure the election, not the broker. A response that leaves a partition out without
    /// an error (Tansu does so for an empty partition) counts as ready.
    pub async fn await_partitions_ready(
        &mut self,
        topic: &str,
        partition_count: i32,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + PARTITION_READY_TIMEOUT;
        let partitions: Vec<(i32, i64)> = (0..partition_count).map(|p| (p, 0)).collect();
        let request = fetch_request_partitions(topic, &partitions, 1, 1, 0);
        loop {
            let correlation_id = self
                .send(ApiKey::Fetch, READINESS_FETCH_VERSION, &request)
                .await?;
            let frame = self.receive_frame().await?;
            let answers = crate::responses::fetch_v4(&frame, correlation_id)?;
            match answers.iter().find(|partition| partition.error_code != 0) {
                None => return Ok(()),
                Some(failed) if !PARTITION_NOT_READY_CODES.contains(&failed.error_code) => bail!(
                    "the new partition {topic}-{} answers Fetch with error {}",
                    failed.partition,
                    failed.error_code
                ),
                Some(failed) if tokio::time::Instant::now() >= deadline => bail!(
                    "the new partition {topic}-{} was not ready within {PARTITION_READY_TIMEOUT:?} (error {})",
                    failed.partition,
                    failed.error_code
                ),
                Some(_) => tokio::time::sleep(PARTITION_READY_RETRY).await,
            }
        }
    }

    /// Creates `topic` with `partitions` partitions (replication 1) with CreateTopics v2; a topic
    /// that already exists is an error, so callers pick fresh names.
    pub async fn create_topic(&mut self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        let created = CreatableTopic::default()
            .with_num_partitions(partitions)
            .with_replication_factor(1);
        self.create(topic, created).await
    }

    /// Creates `topic` with one partition per entry of `replicas` (each the node ids of its
    /// replicas, the first its preferred leader) and the topic `configs`, with CreateTopics v2.
    pub async fn create_topic_assigned(
        &mut self,
        topic: &str,
        replicas: &[Vec<i32>],
        configs: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        use kafka_protocol::messages::create_topics_request::{
            CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
        };
        use kafka_protocol::messages::BrokerId;
        let assignments = (0..)
            .zip(replicas)
            .map(|(partition, nodes)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(partition)
                    .with_broker_ids(nodes.iter().map(|&node| BrokerId(node)).collect())
            })
            .collect();
        let configs = configs
            .iter()
            .map(|(name, value)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string((*name).to_owned()))
                    .with_value(Some(StrBytes::from_string((*value).to_owned())))
            })
            .collect();
        // An explicit assignment comes with count and factor -1, as Kafka requires.
        let created = CreatableTopic::default()
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)
            .with_configs(configs);
        self.create(topic, created).await
    }

    /// Sends one CreateTopics v2 of `created` named `topic` and checks its answer.
    async fn create(
        &mut self,
        topic: &str,
        created: kafka_protocol::messages::create_topics_request::CreatableTopic,
    ) -> anyhow::Result<()> {
        use kafka_protocol::messages::CreateTopicsRequest;
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![created.with_name(
                kafka_protocol::messages::TopicName(StrBytes::from_string(topic.to_owned())),
            )]);
        let correlation_id = self.send(ApiKey::CreateTopics, 2, &request).await?;
        let frame = self.receive_frame().await?;
        let results = crate::responses::create_topics_v2(&frame, correlation_id)
            .context("decoding the CreateTopics response")?;
        let (_, error_code) = results.first().context("empty create-topics response")?;
        if *error_code != 0 {
            bail!("creating {topic} failed with error {error_code}");
        }
        Ok(())
    }

    /// Sends (without waiting) a Produce v3 with `acks` ([`ACKS_LEADER`] or [`ACKS_ALL`]) of one
    /// v2 batch set per partition; returns the correlation id for [`Connection::receive_produce`].
    pub async fn send_produce(
        &mut self,
        topic: &str,
        acks: i16,
        batches_by_partition: &[(i32, Bytes)],
    ) -> anyhow::Result<i32> {
        let request = produce_request(topic, acks, batches_by_partition);
        self.send(ApiKey::Produce, PRODUCE_VERSION, &request).await
    }

    /// Reads the answer to [`Connection::send_produce`]; fails if any partition failed, else
    /// returns the base offset of the first partition.
    pub async fn receive_produce(&mut self, correlation_id: i32) -> anyhow::Result<i64> {
        let frame = self.receive_frame().await?;
        produce_base_offset(&frame, correlation_id)
    }

    /// Produces v2 `batches` to one partition with Produce v3 and acks=1; returns the base offset.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batches: Bytes,
    ) -> anyhow::Result<i64> {
        let correlation_id = self
            .send_produce(topic, ACKS_LEADER, &[(partition, batches)])
            .await?;
        self.receive_produce(correlation_id).await
    }
}

/// The Produce version skiff-bench sends: v3, the first with v2 record batches and the lowest
/// Apache Kafka 4.x still serves.
pub const PRODUCE_VERSION: i16 = 3;

/// Produce `acks` for the leader's acknowledgement only.
pub const ACKS_LEADER: i16 = 1;

/// Produce `acks` for every in-sync replica's acknowledgement.
pub const ACKS_ALL: i16 = -1;

/// The broker's Produce timeout skiff-bench asks for.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// One request frame: size prefix, request header (client id `skiff-bench`) and `request`
/// encoded at `version`.
pub fn request_frame<R: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &R,
) -> anyhow::Result<Vec<u8>> {
    let mut frame = BytesMut::new();
    encode_request_frame(&mut frame, api_key, version, correlation_id, request)?;
    Ok(frame.to_vec())
}

/// Encodes a request frame (size prefix, header, body) into `frame`, replacing what it held and
/// keeping its memory.
pub fn encode_request_frame<R: Encodable>(
    frame: &mut BytesMut,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &R,
) -> anyhow::Result<()> {
    let row = skiff_protocol::api::supported(api_key).context("unsupported api")?;
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("skiff-bench")));
    frame.clear();
    frame.extend_from_slice(&[0; 4]);
    header.encode(frame, row.request_header_version(version))?;
    // Past kafka-protocol's range (Produce v12, TxnOffsetCommit v5) the same bytes as an older
    // version the crate encodes.
    request.encode(
        frame,
        skiff_protocol::api::request_crate_version(api_key, version),
    )?;
    let size = i32::try_from(frame.len() - 4)?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// A Produce request (send it at [`PRODUCE_VERSION`]) of one v2 batch set per partition of `topic`.
pub fn produce_request(
    topic: &str,
    acks: i16,
    batches_by_partition: &[(i32, Bytes)],
) -> ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                topic.to_owned(),
            )))
            .with_partition_data(
                batches_by_partition
                    .iter()
                    .map(|(partition, batches)| {
                        PartitionProduceData::default()
                            .with_index(*partition)
                            .with_records(Some(batches.clone()))
                    })
                    .collect(),
            )])
}

/// Decodes a [`PRODUCE_VERSION`] response frame with the bounded decoder; fails if any partition
/// failed, else returns the base offset of the first partition.
pub fn produce_base_offset(frame: &[u8], correlation_id: i32) -> anyhow::Result<i64> {
    let partitions = crate::responses::produce_v3(frame, correlation_id)
        .context("decoding the Produce response")?;
    if let Some(failed) = partitions
        .iter()
        .find(|partition| partition.error_code != 0)
    {
        bail!(
            "produce to partition {} failed with error {}",
            failed.partition,
            failed.error_code
        );
    }
    partitions
        .first()
        .map(|partition| partition.base_offset)
        .context("empty produce response")
}

/// A Fetch request for one partition at `version`.
pub fn fetch_request(
    topic: &str,
    partition: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    max_bytes: i32,
    max_wait_ms: i32,
) -> FetchRequest {
    fetch_request_partitions(
        topic,
        &[(partition, fetch_offset)],
        partition_max_bytes,
        max_bytes,
        max_wait_ms,
    )
}

/// A Fetch request for `partitions` of one topic, each at its own fetch offset (`(partition,
/// offset)` pairs), at any version (fields a version lacks are simply not encoded).
pub fn fetch_request_partitions(
    topic: &str,
    partitions: &[(i32, i64)],
    partition_max_bytes: i32,
    max_bytes: i32,
    max_wait_ms: i32,
) -> FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_topics(vec![FetchTopic::default()
            .with_topic(kafka_protocol::messages::TopicName(StrBytes::from_string(
                topic.to_owned(),
            )))
            .with_partitions(
                partitions
                    .iter()
                    .map(|(partition, offset)| {
                        FetchPartition::default()
                            .with_partition(*partition)
                            .with_fetch_offset(*offset)
                            .with_partition_max_bytes(partition_max_bytes)
                    })
                    .collect(),
            )])
}

/// Decodes a Fetch response body (after the size prefix) of `version`.
pub fn decode_fetch(mut body: Bytes, version: i16) -> anyhow::Result<FetchResponse> {
    let row = skiff_protocol::api::supported(ApiKey::Fetch).context("fetch")?;
    body.advance(4);
    if row.response_header_version(version) >= 1 {
        body.advance(1);
    }
    FetchResponse::decode(&mut body, version).context("decoding fetch response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::RunCertificate;
    use kafka_protocol::messages::ApiVersionsRequest;
    use tokio::net::TcpListener;

    /// A TLS server that answers each size-prefixed frame with the same frame, until the client
    /// closes.
    async fn echo_server(certificate: &RunCertificate) -> (String, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let acceptor =
            tokio_rustls::TlsAcceptor::from(certificate.server_config().expect("server config"));
        let server = tokio::spawn(async move {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            while let Ok(size) = tls.read_i32().await {
                let mut frame = vec![0u8; usize::try_from(size).unwrap_or(0)];
                if tls.read_exact(&mut frame).await.is_err() {
                    return;
                }
                let _ = tls.write_all(&size.to_be_bytes()).await;
                let _ = tls.write_all(&frame).await;
                let _ = tls.flush().await;
            }
        });
        (address, server)
    }

    #[tokio::test]
    async fn requests_round_trip_over_tls_to_a_server_with_the_run_certificate() {
        let certificate = RunCertificate::generate().expect("certificate");
        let (address, server) = echo_server(&certificate).await;
        let security = Security::Tls(certificate.client_config().expect("client config"));
        let mut connection = Connection::connect_with(&address, &security)
            .await
            .expect("connect");
        for expected_correlation_id in 1..=3 {
            let correlation_id = connection
                .send(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
                .await
                .expect("send");
            assert_eq!(correlation_id, expected_correlation_id);
            let size = connection.read_size().await.expect("size");
            let mut echoed = connection.read_body(size).await.expect("body");
            // The echoed request header: api key, version, correlation id, client id.
            assert_eq!(echoed.get_i16(), ApiKey::ApiVersions as i16);
            assert_eq!(echoed.get_i16(), 0);
            assert_eq!(echoed.get_i32(), expected_correlation_id);
            let client_id_bytes = usize::try_from(echoed.get_i16()).expect("client id");
            assert_eq!(&echoed[..client_id_bytes], b"skiff-bench");
        }
        drop(connection);
        server.await.expect("server");
    }

    #[tokio::test]
    async fn a_server_with_another_certificate_is_refused() {
        let trusted = RunCertificate::generate().expect("trusted");
        let other = RunCertificate::generate().expect("other");
        let (address, server) = echo_server(&other).await;
        let security = Security::Tls(trusted.client_config().expect("client config"));
        let refused = Connection::connect_with(&address, &security).await;
        assert!(refused.is_err(), "handshake with an untrusted certificate");
        server.await.expect("server");
    }
}
