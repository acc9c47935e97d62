//! Listeners with Kafka's security protocols at the wire level: the SASL gate (what is served before
//! authentication, v0 bare tokens and v1 SaslAuthenticate, failures, bounds and the deadline) and
//! TLS (stored and down-converted fetches through user space, each listener advertising itself).
//! Real clients over the same listeners are in `tests/clients/test_security.py`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use skiff_broker::security::sasl::credentials::{credential_from_password, credential_line};
use skiff_broker::security::sasl::ScramMechanism;
use skiff_tests::TestBroker;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const SASL_FAILED: i16 = 58;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;

/// A credentials file with alice (password `alice-secret`).
fn credentials_file(dir: &std::path::Path) -> std::path::PathBuf {
    let mut text = String::new();
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let credential =
            credential_from_password(mechanism, "alice-secret", b"0123456789abcdef", 4096);
        text.push_str(&credential_line(mechanism, "alice", &credential));
        text.push('\n');
    }
    let path = dir.join("users.txt");
    std::fs::write(&path, text).expect("write credentials");
    path
}

/// A framed Kafka client over any stream (plain or TLS).
struct Wire<S> {
    stream: S,
    correlation_id: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    fn new(stream: S) -> Self {
        Self {
            stream,
            correlation_id: 0,
        }
    }

    async fn send<R: Encodable>(&mut self, api_key: ApiKey, version: i16, request: &R) {
        self.correlation_id += 1;
        let row = skiff_protocol::api::supported(api_key).expect("known api");
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("security-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, row.request_header_version(version))
            .expect("header");
        request.encode(&mut body, version).expect("body");
        self.send_bare(&body).await;
    }

    async fn send_bare(&mut self, body: &[u8]) {
        let size = i32::try_from(body.len()).expect("size");
        self.stream
            .write_all(&size.to_be_bytes())
            .await
            .expect("write");
        self.stream.write_all(body).await.expect("write");
        self.stream.flush().await.expect("flush");
    }

    /// The next frame's body, or `None` if the broker closed the connection.
    async fn read_frame(&mut self) -> Option<Bytes> {
        let size = self.stream.read_i32().await.ok()?;
        let mut body = vec![0u8; usize::try_from(size).ok()?];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    async fn request<R: Encodable, T: Decodable>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &R,
    ) -> Option<T> {
        self.send(api_key, version, request).await;
        let mut body = self.read_frame().await?;
        let row = skiff_protocol::api::supported(api_key).expect("known api");
        let correlation_id = body.get_i32();
        assert_eq!(correlation_id, self.correlation_id);
        if row.response_header_version(version) >= 1 {
            // Tagged fields of the flexible response header: none are sent.
            assert_eq!(body.get_u8(), 0);
        }
        Some(T::decode(&mut body, version).expect("decodable response"))
    }

    /// A SaslHandshake for `mechanism` at `version`; `None` if the broker closed instead.
    async fn handshake(
        &mut self,
        version: i16,
        mechanism: &'static str,
    ) -> Option<SaslHandshakeResponse> {
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        self.request(ApiKey::SaslHandshake, version, &request).await
    }

    /// A SaslAuthenticate (v1) carrying `token`.
    async fn authenticate(&mut self, token: &[u8]) -> Option<SaslAuthenticateResponse> {
        self.authenticate_at(1, token).await
    }

    /// A SaslAuthenticate at `version` carrying `token`.
    async fn authenticate_at(
        &mut self,
        version: i16,
        token: &[u8],
    ) -> Option<SaslAuthenticateResponse> {
        let request =
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        self.request(ApiKey::SaslAuthenticate, version, &request)
            .await
    }

    /// True once the broker has closed the connection (reads end without a frame).
    async fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                self.stream.read(&mut byte)
            )
            .await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

async fn connect(address: SocketAddr) -> Wire<TcpStream> {
    Wire::new(TcpStream::connect(address).await.expect("connect"))
}

async fn sasl_broker(dir: &std::path::Path, extra: &[&str]) -> TestBroker {
    let users = credentials_file(dir);
    let mut settings = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0".to_owned(),
        format!("skiff.sasl.credentials.file={}", users.display()),
    ];
    settings.extend(extra.iter().map(|item| (*item).to_owned()));
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    TestBroker::start(&settings).await.expect("broker")
}

fn metadata_request() -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(Vec::new()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_authentication_only_api_versions_and_the_handshake_are_served() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = sasl_broker(dir.path(), &[]).await;
    let sasl = broker.listener("SASL_PLAINTEXT");

    let mut client = connect(sasl).await;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 1, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions is answered before authentication");
    let keys: Vec<i16> = versions.api_keys.iter().map(|row| row.api_key).collect();
    assert!(keys.contains(&(ApiKey::SaslHandshake as i16)));
    assert!(keys.contains(&(ApiKey::SaslAuthenticate as i16)));
    let answer: Option<MetadataResponse> = client
        .request(ApiKey::Metadata, 1, &metadata_request())
        .await;
    assert!(
        answer.is_none(),
        "Metadata before authentication must close"
    );
    assert!(client.closed().await);

    // A frame larger than an unauthenticated peer may send closes before it is read.
    let mut client = connect(sasl).await;
    client
        .stream
        .write_all(&(1024 * 1024i32).to_be_bytes())
        .await
        .expect("write");
    assert!(client.closed().await);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_handshake_takes_a_bare_plain_token_then_serves_requests() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = sasl_broker(dir.path(), &[]).await;
    let mut client = connect(broker.listener("SASL_PLAINTEXT")).await;
    let handshake: SaslHandshakeResponse = client.handshake(0, "PLAIN").await.expect("handshake");
    assert_eq!(handshake.error_code, 0);
    let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    client.send_bare(b"\0alice\0alice-secret").await;
    let answer = client.read_frame().await.expect("bare answer");
    assert!(answer.is_empty(), "PLAIN's server answer is an empty token");
    let metadata: MetadataResponse = client
        .request(ApiKey::Metadata, 1, &metadata_request())
        .await
        .expect("served after authentication");
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!(
        metadata.brokers[0].port,
        i32::from(broker.listener("SASL_PLAINTEXT").port()),
        "Metadata names the listener the client came in on"
    );
    // A second handshake after authentication is refused but the connection stays.
    let again: SaslHandshakeResponse = client.handshake(1, "PLAIN").await.expect("answered");
    assert_eq!(again.error_code, ILLEGAL_SASL_STATE);
    broker.stop().await;
}

/// Every SaslHandshake version (v0 is followed by a bare token) and every SaslAuthenticate version
/// after a v1 handshake authenticate and then serve requests (`every_version.rs` leaves the SASL
/// APIs to this file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sasl_authenticate_version_authenticates_after_a_v1_handshake() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = sasl_broker(dir.path(), &[]).await;
    for version in 0..=2i16 {
        let mut client = connect(broker.listener("SASL_PLAINTEXT")).await;
        let handshake: SaslHandshakeResponse =
            client.handshake(1, "PLAIN").await.expect("handshake");
        assert_eq!(handshake.error_code, 0);
        let answer: SaslAuthenticateResponse = client
            .authenticate_at(version, b"\0alice\0alice-secret")
            .await
            .expect("answered");
        assert_eq!(answer.error_code, 0, "SaslAuthenticate v{version}");
        let metadata: MetadataResponse = client
            .request(ApiKey::Metadata, 1, &metadata_request())
            .await
            .expect("served after authentication");
        assert_eq!(
            metadata.brokers.len(),
            1,
            "after SaslAuthenticate v{version}"
        );
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_and_an_unknown_user_get_the_same_error_and_a_close() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = sasl_broker(dir.path(), &[]).await;
    let mut messages = Vec::new();
    for token in [&b"\0alice\0wrong"[..], b"\0mallory\0alice-secret"] {
        let mut client = connect(broker.listener("SASL_PLAINTEXT")).await;
        let handshake: SaslHandshakeResponse =
            client.handshake(1, "PLAIN").await.expect("handshake");
        assert_eq!(handshake.error_code, 0);
        let answer: SaslAuthenticateResponse = client.authenticate(token).await.expect("answered");
        assert_eq!(answer.error_code, SASL_FAILED);
        messages.push(answer.error_message.map(|m| m.to_string()));
        assert!(client.closed().await);
    }
    assert_eq!(messages[0], messages[1], "the two failures must look alike");

    // Good credentials on a new connection still work: nothing was locked.
    let mut client = connect(broker.listener("SASL_PLAINTEXT")).await;
    let _: SaslHandshakeResponse = client.handshake(1, "PLAIN").await.expect("handshake");
    let answer: SaslAuthenticateResponse = client
        .authenticate(b"\0alice\0alice-secret")
        .await
        .expect("answered");
    assert_eq!(answer.error_code, 0);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_mechanisms_timeouts_and_the_plaintext_listener() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = sasl_broker(
        dir.path(),
        &[
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "skiff.authentication.timeout.ms=300",
        ],
    )
    .await;
    let mut client = connect(broker.listener("SASL_PLAINTEXT")).await;
    let handshake: SaslHandshakeResponse = client.handshake(1, "PLAIN").await.expect("answered");
    assert_eq!(handshake.error_code, UNSUPPORTED_SASL_MECHANISM);
    let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(offered, ["SCRAM-SHA-512"]);
    assert!(client.closed().await);

    // A client that never authenticates is closed at the deadline.
    let mut idle = connect(broker.listener("SASL_PLAINTEXT")).await;
    assert!(idle.closed().await);

    // On the PLAINTEXT listener there is no exchange: SaslHandshake is answered
    // ILLEGAL_SASL_STATE and the connection keeps serving.
    let mut plain = connect(broker.listener("PLAINTEXT")).await;
    let handshake: SaslHandshakeResponse = plain.handshake(1, "PLAIN").await.expect("answered");
    assert_eq!(handshake.error_code, ILLEGAL_SASL_STATE);
    let metadata: MetadataResponse = plain
        .request(ApiKey::Metadata, 1, &metadata_request())
        .await
        .expect("still served");
    assert_eq!(
        metadata.brokers[0].port,
        i32::from(broker.listener("PLAINTEXT").port())
    );
    broker.stop().await;
}

/// A self-signed certificate for 127.0.0.1 and a keystore PEM (chain + key) for the broker.
fn tls_material(
    dir: &std::path::Path,
) -> (
    std::path::PathBuf,
    rustls::pki_types::CertificateDer<'static>,
) {
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("params");
    let certificate = params.self_signed(&key).expect("certificate");
    let keystore = dir.join("keystore.pem");
    std::fs::write(
        &keystore,
        format!("{}{}", certificate.pem(), key.serialize_pem()),
    )
    .expect("write keystore");
    (keystore, certificate.der().clone())
}

async fn tls_connect(
    address: SocketAddr,
    trusted: &rustls::pki_types::CertificateDer<'static>,
) -> Wire<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(address).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    Wire::new(connector.connect(name, tcp).await.expect("TLS handshake"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_stored_and_down_converted_fetches_like_plaintext() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest, ProduceResponse};

    let dir = tempfile::tempdir().expect("dir");
    let (keystore, certificate) = tls_material(dir.path());
    let broker = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &format!("ssl.keystore.location={}", keystore.display()),
        // Small chunks, so one legacy fetch is converted and encrypted in many pieces.
        "skiff.down.conversion.chunk.bytes=4096",
    ])
    .await
    .expect("broker");
    let topic = "tls-topic";
    let mut plain_client =
        skiff_bench::client::Connection::connect(&broker.listener("PLAINTEXT").to_string())
            .await
            .expect("connect");
    skiff_tests::create_topic(&mut plain_client, topic, &[])
        .await
        .expect("topic");

    let mut tls = tls_connect(broker.listener("SSL"), &certificate).await;
    let metadata: MetadataResponse = tls
        .request(ApiKey::Metadata, 1, &metadata_request())
        .await
        .expect("metadata over TLS");
    assert_eq!(
        metadata.brokers[0].port,
        i32::from(broker.listener("SSL").port()),
        "TLS clients are sent back to the TLS listener"
    );
    // 200 batches of 10 records of 300 bytes: ~600 KB, far more than one chunk or file piece.
    for first in 0..200 {
        let batch = skiff_tests::batch(
            first * 10,
            10,
            300,
            skiff_protocol::records::Compression::None,
        );
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![
                kafka_protocol::messages::produce_request::TopicProduceData::default()
                    .with_name(skiff_tests::topic_name(topic))
                    .with_partition_data(vec![
                        kafka_protocol::messages::produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(batch))),
                    ]),
            ]);
        let answer: ProduceResponse = tls
            .request(ApiKey::Produce, 7, &request)
            .await
            .expect("produce over TLS");
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    let fetch = |version: i16| {
        let mut request = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(100)
            .with_topics(vec![FetchTopic::default()
                .with_topic(skiff_tests::topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(8 * 1024 * 1024)])]);
        if version >= 3 {
            request = request.with_max_bytes(16 * 1024 * 1024);
        }
        request
    };
    for version in [2i16, 11] {
        let over_tls: FetchResponse = tls
            .request(ApiKey::Fetch, version, &fetch(version))
            .await
            .expect("fetch over TLS");
        let over_plain = skiff_tests::fetch(&mut plain_client, version, &fetch(version))
            .await
            .expect("fetch over PLAINTEXT");
        let tls_records = over_tls.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        let plain_records = over_plain.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        assert!(
            tls_records.len() > 500_000,
            "v{version}: {} bytes",
            tls_records.len()
        );
        assert_eq!(tls_records, plain_records, "v{version} differs over TLS");
    }
    broker.stop().await;
}

/// A CA for client certificates.
fn client_ca() -> (rcgen::Certificate, rcgen::KeyPair) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    (ca, ca_key)
}

/// A client certificate for `subject`, signed by `ca`.
fn client_certificate(
    ca: &rcgen::Certificate,
    ca_key: &rcgen::KeyPair,
    subject: rcgen::DistinguishedName,
) -> (
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let client_key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::new()).expect("params");
    params.distinguished_name = subject;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let certificate = params
        .signed_by(&client_key, ca, ca_key)
        .expect("client certificate");
    let key =
        rustls::pki_types::PrivateKeyDer::try_from(client_key.serialize_der()).expect("client key");
    (certificate.der().clone(), key)
}

/// A CA, and a client certificate for `common_name` signed by it.
fn client_material(
    common_name: &str,
) -> (
    rcgen::Certificate,
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let (ca, ca_key) = client_ca();
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(rcgen::DnType::CommonName, common_name);
    let (certificate, key) = client_certificate(&ca, &ca_key, subject);
    (ca, certificate, key)
}

/// A broker whose SSL listener requires a client certificate signed by `ca`, with the ACL file
/// `acls` and `topics` created through its PLAINTEXT listener (whose anonymous user is a super
/// user); and the server's certificate to trust.
async fn client_auth_broker(
    dir: &std::path::Path,
    ca: &rcgen::Certificate,
    acls: &str,
    topics: &[&str],
    settings: &[&str],
) -> (TestBroker, rustls::pki_types::CertificateDer<'static>) {
    let (keystore, server_certificate) = tls_material(dir);
    let truststore = dir.join("truststore.pem");
    std::fs::write(&truststore, ca.pem()).expect("write truststore");
    let acl_file = dir.join("acls.txt");
    std::fs::write(&acl_file, acls).expect("acls");
    let keystore_setting = format!("ssl.keystore.location={}", keystore.display());
    let truststore_setting = format!("ssl.truststore.location={}", truststore.display());
    let acl_setting = format!("skiff.acl.file={}", acl_file.display());
    let mut all_settings = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &keystore_setting,
        &truststore_setting,
        "ssl.client.auth=required",
        &acl_setting,
        "super.users=User:ANONYMOUS",
    ];
    all_settings.extend_from_slice(settings);
    let broker = TestBroker::start(&all_settings).await.expect("broker");
    let mut admin =
        skiff_bench::client::Connection::connect(&broker.listener("PLAINTEXT").to_string())
            .await
            .expect("connect");
    for topic in topics {
        skiff_tests::create_topic(&mut admin, topic, &[])
            .await
            .expect("topic");
    }
    (broker, server_certificate)
}

/// A TLS connection to the SSL listener that presents `certificate`.
async fn connect_with_certificate(
    broker: &TestBroker,
    server_certificate: &rustls::pki_types::CertificateDer<'static>,
    certificate: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_certificate.clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let with_certificate = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![certificate], key)
        .expect("client auth");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tcp = TcpStream::connect(broker.listener("SSL")).await?;
    tokio_rustls::TlsConnector::from(Arc::new(with_certificate))
        .connect(name, tcp)
        .await
}

/// The topics Metadata v1 describes to a client that presents `certificate` on the SSL listener.
async fn topics_described_to(
    broker: &TestBroker,
    server_certificate: &rustls::pki_types::CertificateDer<'static>,
    certificate: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Vec<String> {
    let stream = connect_with_certificate(broker, server_certificate, certificate, key)
        .await
        .expect("handshake");
    let mut client = Wire::new(stream);
    let metadata: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            1,
            &MetadataRequest::default().with_topics(None),
        )
        .await
        .expect("metadata");
    metadata
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref().map(|name| name.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_client_certificate_names_the_principal_for_acls() {
    let dir = tempfile::tempdir().expect("dir");
    let (ca, client_certificate, client_key) = client_material("reader");
    let (broker, server_certificate) = client_auth_broker(
        dir.path(),
        &ca,
        "allow User:CN=reader describe topic:visible\n",
        &["visible", "hidden"],
        &[],
    )
    .await;

    // Without a certificate the TLS handshake fails.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_certificate.clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let anonymous = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tcp = TcpStream::connect(broker.listener("SSL"))
        .await
        .expect("connect");
    let refused = async {
        let mut stream = tokio_rustls::TlsConnector::from(Arc::new(anonymous))
            .connect(name.clone(), tcp)
            .await?;
        // TLS 1.3 reports the refusal on the first read after the handshake.
        stream.write_all(&[0, 0, 0, 0]).await?;
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await?;
        std::io::Result::Ok(())
    };
    assert!(
        refused.await.is_err(),
        "a client without a certificate must be refused"
    );

    // With one, the principal is its subject: only `visible` is described to it.
    let names =
        topics_described_to(&broker, &server_certificate, client_certificate, client_key).await;
    assert_eq!(names, ["visible"]);
    broker.stop().await;
}

/// `CN=a,O=b` (two RDNs) and a CN whose value is `a,O=b` are different principals (the second is
/// `CN=a\,O\=b`, as Kafka names it), and ACLs tell them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comma_inside_a_subject_value_is_another_principal_for_acls() {
    let dir = tempfile::tempdir().expect("dir");
    let (ca, ca_key) = client_ca();
    let (broker, server_certificate) = client_auth_broker(
        dir.path(),
        &ca,
        "allow User:CN=a,O=b describe topic:two-rdns\n\
         allow User:CN=a\\,O\\=b describe topic:one-cn\n",
        &["two-rdns", "one-cn"],
        &[],
    )
    .await;
    let mut two_rdns = rcgen::DistinguishedName::new();
    two_rdns.push(rcgen::DnType::OrganizationName, "b");
    two_rdns.push(rcgen::DnType::CommonName, "a");
    let mut one_cn = rcgen::DistinguishedName::new();
    one_cn.push(rcgen::DnType::CommonName, "a,O=b");
    for (subject, expected) in [(two_rdns, "two-rdns"), (one_cn, "one-cn")] {
        let (certificate, key) = client_certificate(&ca, &ca_key, subject);
        let names = topics_described_to(&broker, &server_certificate, certificate, key).await;
        assert_eq!(names, [expected]);
    }
    broker.stop().await;
}

/// `ssl.principal.mapping.rules` turn the subject into the user ACLs name (`CN=Alice,O=Eng` is
/// `alice` under a Kafka-style rule), and a subject no rule applies to is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapping_rules_name_the_principal_and_refuse_subjects_they_do_not_map() {
    let dir = tempfile::tempdir().expect("dir");
    let (ca, ca_key) = client_ca();
    let (broker, server_certificate) = client_auth_broker(
        dir.path(),
        &ca,
        "allow User:alice describe topic:visible\n",
        &["visible", "hidden"],
        &["ssl.principal.mapping.rules=RULE:^CN=([^,]*),O=Eng$/$1/L"],
    )
    .await;
    let mut mapped = rcgen::DistinguishedName::new();
    mapped.push(rcgen::DnType::OrganizationName, "Eng");
    mapped.push(rcgen::DnType::CommonName, "Alice");
    let (certificate, key) = client_certificate(&ca, &ca_key, mapped);
    let names = topics_described_to(&broker, &server_certificate, certificate, key).await;
    assert_eq!(names, ["visible"]);

    let mut unmapped = rcgen::DistinguishedName::new();
    unmapped.push(rcgen::DnType::OrganizationName, "Sales");
    unmapped.push(rcgen::DnType::CommonName, "Alice");
    let (certificate, key) = client_certificate(&ca, &ca_key, unmapped);
    let answered = async {
        let mut stream =
            connect_with_certificate(&broker, &server_certificate, certificate, key).await?;
        // An ApiVersions v0 request: header v1, client id "x".
        stream
            .write_all(&[0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1, b'x'])
            .await?;
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).await?;
        std::io::Result::Ok(())
    };
    assert!(
        answered.await.is_err(),
        "a subject no rule applies to must be refused"
    );
    broker.stop().await;
}

#[tokio::test]
async fn bad_mapping_rules_stop_the_start_with_the_rule_named() {
    let error = TestBroker::start(&["ssl.principal.mapping.rules=RULE:^CN=(.*)/$1/Lx"])
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("ssl.principal.mapping.rules"), "{error}");
    assert!(error.contains("RULE:^CN=(.*)/$1/Lx"), "{error}");
}
