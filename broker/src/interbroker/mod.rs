//! The inter-broker request client: one request to one broker of the cluster and its response
//! body, for the coordinators and handlers that talk to another broker (the transaction
//! coordinator's WriteTxnMarkers to partition leaders, a leader's AddPartitionsToTxn to a
//! transaction coordinator). The replica fetcher keeps its own connection per leader (one Fetch
//! in flight, its own bounds) and does not use this.
//!
//! It owns one connection per destination broker, opened on first use to the destination's
//! inter-broker listener (from the image's broker registrations), reused while it works and
//! dropped after any error or timeout, so the next call reconnects. Requests to one destination
//! go one at a time over its connection (callers queue on its lock); requests to different
//! destinations run side by side.
//!
//! Bounds: a connection attempt [`CONNECT_TIMEOUT`]; a whole call (queueing included)
//! [`CALL_TIMEOUT`] (Kafka's inter-broker `request.timeout.ms` default); a response body at most
//! the caller's `response_bytes_max` (the caller knows what its API can answer).
//!
//! Must never: decode a peer's response body with kafka-protocol (the caller decodes it with
//! the bounded decoders of `skiff_protocol`), keep a connection after an error (its framing may
//! be lost), or wait without a timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use skiff_placement::NodeId;
use skiff_protocol::codec::Reader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::ClusterHandle;

/// How long a connection attempt to another broker may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one call may take from its start (waiting for the destination's connection, sending,
/// reading the answer): Kafka's `request.timeout.ms` default for inter-broker requests.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Tagged fields accepted in a response header (Kafka defines none there).
const RESPONSE_HEADER_TAGGED_FIELDS_MAX: usize = 16;

/// Why a call to another broker failed. Every failure drops the destination's connection.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum InterBrokerError {
    /// The image has no registration (or no endpoint) for the destination.
    #[error("broker {0} has no registered endpoint")]
    NoEndpoint(NodeId),
    /// The destination's inter-broker listener is not PLAINTEXT, which this client speaks.
    #[error(
        "broker {node}'s listener '{listener}' is {protocol}; inter-broker requests need PLAINTEXT"
    )]
    NotPlaintext {
        /// The destination.
        node: NodeId,
        /// The listener looked up.
        listener: String,
        /// Its security protocol.
        protocol: String,
    },
    /// The connection could not be opened.
    #[error("connecting to broker {node} at {address}: {reason}")]
    Connect {
        /// The destination.
        node: NodeId,
        /// host:port.
        address: String,
        /// What failed.
        reason: String,
    },
    /// The request could not be encoded (a field out of its version's range).
    #[error("encoding {api_key:?} v{version}: {reason}")]
    Encode {
        /// The API.
        api_key: ApiKey,
        /// Its version.
        version: i16,
        /// The encoder's complaint.
        reason: String,
    },
    /// Reading or writing the socket failed.
    #[error("broker {node}: {source}")]
    Io {
        /// The destination.
        node: NodeId,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The response frame was larger than the caller allows.
    #[error("broker {node} answered {size} bytes, more than the {bytes_max} allowed")]
    TooLarge {
        /// The destination.
        node: NodeId,
        /// The frame size announced.
        size: i64,
        /// The caller's bound.
        bytes_max: usize,
    },
    /// The response header was malformed or answered another request.
    #[error("broker {node}: bad response header: {reason}")]
    BadHeader {
        /// The destination.
        node: NodeId,
        /// What was wrong.
        reason: String,
    },
    /// No answer within [`CALL_TIMEOUT`].
    #[error("broker {node} did not answer within {timeout:?}")]
    Timeout {
        /// The destination.
        node: NodeId,
        /// The bound that passed.
        timeout: Duration,
    },
}

/// One destination's connection; `None` until opened, while in use and after an error.
type Slot = Arc<tokio::sync::Mutex<Option<TcpStream>>>;

/// Sends requests to other brokers. Cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
pub struct InterBrokerClient {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: ClusterHandle,
    /// The listener name looked up in the destination's registration.
    listener: String,
    /// `client_id` of every request (names this broker in the destination's logs).
    client_id: String,
    correlation: AtomicI32,
    connections: Mutex<BTreeMap<NodeId, Slot>>,
}

impl InterBrokerClient {
    /// A client for broker `node_id` that reaches others on their `listener`.
    pub fn new(cluster: ClusterHandle, listener: String, node_id: i32) -> Self {
        Self {
            inner: Arc::new(Inner {
                cluster,
                listener,
                client_id: format!("skiff-broker-{node_id}"),
                correlation: AtomicI32::new(0),
                connections: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The client of this broker (`node.id`), reaching others on `inter.broker.listener.name`.
    pub fn for_broker(cluster: ClusterHandle, config: &crate::config::Config) -> Self {
        let listener = config.inter_broker_listener().unwrap_or_default();
        Self::new(cluster, listener, config.node_id)
    }

    /// Sends `request` as `api_key` v`version` to broker `node` and returns the response body
    /// (after its header, whose correlation id was checked), at most `response_bytes_max` bytes.
    pub async fn call<R: Encodable>(
        &self,
        node: NodeId,
        api_key: ApiKey,
        version: i16,
        request: &R,
        response_bytes_max: usize,
    ) -> Result<Bytes, InterBrokerError> {
        let correlation_id = self.inner.correlation.fetch_add(1, Ordering::Relaxed);
        let frame = self.request_frame(api_key, version, correlation_id, request)?;
        let slot = self.slot(node);
        let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
        let timeout = InterBrokerError::Timeout {
            node,
            timeout: CALL_TIMEOUT,
        };
        let mut connection = match tokio::time::timeout_at(deadline, slot.lock()).await {
            Ok(connection) => connection,
            Err(_) => return Err(timeout),
        };
        // The stream is taken out while in use and put back only after a whole exchange: a call
        // that fails, times out or is dropped half-way leaves no half-read connection behind.
        let exchange = async {
            let mut stream = match connection.take() {
                Some(stream) => stream,
                None => self.connect(node).await?,
            };
            let body = exchange(node, &mut stream, &frame, response_bytes_max).await?;
            Ok::<_, InterBrokerError>((stream, body))
        };
        let (stream, body) = match tokio::time::timeout_at(deadline, exchange).await {
            Ok(result) => result?,
            Err(_) => return Err(timeout),
        };
        *connection = Some(stream);
        drop(connection);
        strip_response_header(node, api_key, version, correlation_id, body)
    }

    /// The destination's connection slot, created on first use.
    fn slot(&self, node: NodeId) -> Slot {
        let mut connections = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        connections.entry(node).or_default().clone()
    }

    async fn connect(&self, node: NodeId) -> Result<TcpStream, InterBrokerError> {
        let listener = &self.inner.listener;
        let (host, port, protocol) = self
            .inner
            .cluster
            .broker_address(node, listener)
            .ok_or(InterBrokerError::NoEndpoint(node))?;
        if protocol != "PLAINTEXT" {
            return Err(InterBrokerError::NotPlaintext {
                node,
                listener: listener.clone(),
                protocol,
            });
        }
        let address = format!("{host}:{port}");
        let connect_error = |reason: String| InterBrokerError::Connect {
            node,
            address: address.clone(),
            reason,
        };
        let stream =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host.as_str(), port)))
                .await
                .map_err(|_| connect_error("timed out".to_owned()))?
                .map_err(|error| connect_error(error.to_string()))?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// Size prefix, request header (its version from the API and version) and the body.
    fn request_frame<R: Encodable>(
        &self,
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        request: &R,
    ) -> Result<Vec<u8>, InterBrokerError> {
        let encode_error = |reason: String| InterBrokerError::Encode {
            api_key,
            version,
            reason,
        };
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.inner.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, api_key.request_header_version(version))
            .map_err(|error| encode_error(error.to_string()))?;
        request
            .encode(&mut body, version)
            .map_err(|error| encode_error(error.to_string()))?;
        let size = i32::try_from(body.len())
            .map_err(|_| encode_error(format!("{} bytes do not fit a frame", body.len())))?;
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&size.to_be_bytes());
        frame.extend_from_slice(&body);
        Ok(frame)
    }
}

/// Writes one request frame and reads its response frame (at most `response_bytes_max` bytes).
async fn exchange(
    node: NodeId,
    stream: &mut TcpStream,
    frame: &[u8],
    response_bytes_max: usize,
) -> Result<Bytes, InterBrokerError> {
    let io = |source| InterBrokerError::Io { node, source };
    stream.write_all(frame).await.map_err(io)?;
    let size = stream.read_i32().await.map_err(io)?;
    let Some(size_usize) = usize::try_from(size)
        .ok()
        .filter(|size| *size <= response_bytes_max)
    else {
        return Err(InterBrokerError::TooLarge {
            node,
            size: i64::from(size),
            bytes_max: response_bytes_max,
        });
    };
    let mut body = vec![0u8; size_usize];
    stream.read_exact(&mut body).await.map_err(io)?;
    Ok(Bytes::from(body))
}

/// Checks the response header (correlation id; tagged fields of a flexible version) and returns
/// the body after it.
fn strip_response_header(
    node: NodeId,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> Result<Bytes, InterBrokerError> {
    let bad = |reason: String| InterBrokerError::BadHeader { node, reason };
    let mut reader = Reader::new(&frame);
    let answered = reader.i32().map_err(|error| bad(error.to_string()))?;
    if answered != correlation_id {
        return Err(bad(format!(
            "correlation id {answered}, expected {correlation_id}"
        )));
    }
    if api_key.response_header_version(version) >= 1 {
        reader
            .tagged_fields(RESPONSE_HEADER_TAGGED_FIELDS_MAX, |_, _| Ok(()))
            .map_err(|error| bad(error.to_string()))?;
    }
    let header_bytes = reader.position();
    Ok(frame.slice(header_bytes..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flexible_response_header_is_stripped_with_its_tagged_fields() {
        // correlation 7, one tagged field (tag 3, 2 bytes), then the body.
        let frame = Bytes::from_static(&[0, 0, 0, 7, 1, 3, 2, 0xAA, 0xBB, 0x42, 0x43]);
        let body = strip_response_header(1, ApiKey::WriteTxnMarkers, 1, 7, frame).unwrap();
        assert_eq!(&body[..], &[0x42, 0x43]);
    }

    #[test]
    fn a_non_flexible_response_header_is_only_the_correlation_id() {
        let frame = Bytes::from_static(&[0, 0, 0, 9, 0x01]);
        let body = strip_response_header(1, ApiKey::AddPartitionsToTxn, 2, 9, frame).unwrap();
        assert_eq!(&body[..], &[0x01]);
    }

    #[test]
    fn an_answer_to_another_request_or_a_short_header_is_refused() {
        let other = Bytes::from_static(&[0, 0, 0, 8, 0]);
        assert!(matches!(
            strip_response_header(1, ApiKey::WriteTxnMarkers, 1, 7, other),
            Err(InterBrokerError::BadHeader { .. })
        ));
        let short = Bytes::from_static(&[0, 0]);
        assert!(strip_response_header(1, ApiKey::WriteTxnMarkers, 1, 7, short).is_err());
        // A tagged-field count larger than the bytes left.
        let lying = Bytes::from_static(&[0, 0, 0, 7, 9]);
        assert!(strip_response_header(1, ApiKey::WriteTxnMarkers, 1, 7, lying).is_err());
    }
}
