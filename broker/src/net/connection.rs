//! One client connection: read a frame (size prefix checked against `socket.request.max.bytes` and
//! the broker-wide request-bytes budget before anything is allocated), handle it, write the
//! response, then read the next — one request in flight, so responses stay in order (Kafka's mute
//! rule). Idle connections are closed after `connections.max.idle.ms`. On a SASL listener the
//! connection serves only ApiVersions and the SASL exchange until it has authenticated, and closes
//! if that takes longer than `skiff.authentication.timeout.ms`; after a v0 SaslHandshake, frames
//! are bare SASL tokens until the exchange ends.
//!
//! Between requests the connection is idle as far as admission goes (`net::admission`): it may be
//! closed then to make room for a new client, never while a request is read, handled or answered.
//! After an answer that throttles the client (a client quota, `crate::quota`), the connection
//! reads nothing for the throttle time: Kafka's channel mute of KIP-219.
//!
//! Each request's service time ends here, where its response has been written: from its frame
//! received to that point, less the waits the handler counted as remote (`crate::metrics`).
//!
//! Must never: allocate a frame before its size is checked, let a bad frame take down anything but
//! this connection, or serve a request on a SASL listener before authentication (ApiVersions and
//! the SASL APIs aside).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use skiff_protocol::frame::FrameCheck;

use crate::context::Ctx;
use crate::handlers;
use crate::net::admission::Admitted;
use crate::net::frame_capture::FrameCapture;
use crate::net::send::{write_response, Transport};
use crate::security::sasl::{Authenticator, TokenFraming};
use crate::security::session::{Principal, Session};

/// What a connection is served with besides its stream: `sasl` is the exchange to complete first
/// (SASL listeners) and `authenticated_by` the deadline for it; `admitted` its place among the
/// connections the limits allow.
pub(crate) struct Setup<'a> {
    pub(crate) peer: SocketAddr,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) session: Session,
    pub(crate) sasl: Option<Authenticator>,
    pub(crate) authenticated_by: tokio::time::Instant,
    pub(crate) admitted: &'a Admitted,
    /// Where request frames are written as they arrive (`skiff.frame.capture.dir`), if anywhere.
    pub(crate) capture: Option<Arc<FrameCapture>>,
}

/// Serves one connection until the client closes, an error, the idle timeout, an eviction or
/// shutdown.
pub(crate) async fn run<S: Transport>(mut stream: S, setup: Setup<'_>) {
    let Setup {
        peer,
        ctx,
        mut stop,
        session,
        sasl,
        authenticated_by,
        admitted,
        capture,
    } = setup;
    ctx.metrics.connection_opened();
    let idle = Duration::from_millis(ctx.config.connections_max_idle_ms);
    let mut state = ConnectionState {
        session,
        sasl,
        authenticated_by,
        capture,
    };
    let outcome = serve(&mut stream, &ctx, &mut stop, idle, &mut state, admitted).await;
    ctx.metrics.connection_closed();
    match outcome {
        Ok(()) => tracing::debug!(%peer, "connection closed"),
        Err(reason) => tracing::debug!(%peer, %reason, "connection closed"),
    }
}

/// Largest frame accepted on a SASL listener before authentication (Kafka's
/// `sasl.server.max.receive.size` default): ApiVersions and SASL messages are far smaller.
pub(crate) const UNAUTHENTICATED_FRAME_BYTES_MAX: usize = 512 * 1024;

/// Why the broker closed a connection (logged at debug level; the client sees only the close).
#[derive(Debug, thiserror::Error)]
enum CloseReason {
    /// The SASL exchange outlived `skiff.authentication.timeout.ms`.
    #[error("not authenticated within skiff.authentication.timeout.ms")]
    AuthenticationTimedOut,
    /// Idle longest when `max.connections` were open and a new client came.
    #[error("closed to make room for a new connection (max.connections)")]
    Evicted,
    /// No request arrived within `connections.max.idle.ms`.
    #[error("idle for {0:?}")]
    Idle(Duration),
    /// A frame's body did not arrive within `connections.max.idle.ms` of its size prefix.
    #[error("frame body not received within {0:?}")]
    FrameBodyTimedOut(Duration),
    /// The size prefix is above the bound for this connection.
    #[error("request of {body_bytes} bytes is above the bound of {max_bytes} (socket.request.max.bytes, or the unauthenticated bound)")]
    FrameTooLarge {
        /// What the prefix says.
        body_bytes: usize,
        /// The bound.
        max_bytes: usize,
    },
    /// The size prefix is negative.
    #[error("negative frame size {0}")]
    NegativeFrameSize(i32),
    /// The broker-wide request budget was closed: the broker is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// A handler answered (or not) and asked to close: a request that cannot be answered, a
    /// failed SASL exchange.
    #[error("closed after a request that cannot be answered")]
    Unanswerable,
    /// The frame checker found the four bytes read too short for a size prefix (it cannot:
    /// kept as an error rather than a panic).
    #[error("incomplete size prefix")]
    IncompleteSizePrefix,
    /// Reading the socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// Writing the response failed.
    #[error("response: {0}")]
    Send(#[from] crate::net::send::SendError),
}

/// What a connection knows about its client.
struct ConnectionState {
    session: Session,
    /// The SASL exchange, until it has succeeded.
    sasl: Option<Authenticator>,
    authenticated_by: tokio::time::Instant,
    capture: Option<Arc<FrameCapture>>,
}

impl ConnectionState {
    /// How long the next frame may take to arrive: the idle timeout, or what is left of the
    /// authentication deadline while the SASL exchange is not done.
    fn read_timeout(&self, idle: Duration) -> Result<Duration, CloseReason> {
        if self.sasl.is_none() {
            return Ok(idle);
        }
        let left = self
            .authenticated_by
            .saturating_duration_since(crate::clock::timer_now());
        if left.is_zero() {
            return Err(CloseReason::AuthenticationTimedOut);
        }
        Ok(left.min(idle))
    }
}

async fn serve<S: Transport>(
    stream: &mut S,
    ctx: &Ctx,
    stop: &mut watch::Receiver<bool>,
    idle: Duration,
    state: &mut ConnectionState,
    admitted: &Admitted,
) -> Result<(), CloseReason> {
    loop {
        let read_timeout = state.read_timeout(idle)?;
        let mut size_prefix = [0u8; 4];
        tokio::select! {
            biased;
            _ = stop.changed() => return Ok(()),
            _ = admitted.evicted() => return Err(CloseReason::Evicted),
            read = tokio::time::timeout(read_timeout, stream.read_exact(&mut size_prefix)) => match read {
                Err(_) if state.sasl.is_some() => return Err(CloseReason::AuthenticationTimedOut),
                Err(_) => return Err(CloseReason::Idle(idle)),
                Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Ok(Err(error)) => return Err(error.into()),
                Ok(Ok(_)) => {}
            },
        }
        if !admitted.begin_request() {
            // Evicted between the prefix arriving and here: the eviction won, the request is
            // left unread (the client sees a closed connection and retries).
            return Err(CloseReason::Evicted);
        }
        // Before authentication a peer gets only as much memory as a SASL exchange needs.
        let request_bytes_max = if state.sasl.is_some() {
            UNAUTHENTICATED_FRAME_BYTES_MAX
        } else {
            ctx.config.socket_request_max_bytes as usize
        };
        let frame_len = frame_body_len(&size_prefix, request_bytes_max)?;
        // The broker-wide budget bounds the memory all connections' frames hold together.
        let _budget = ctx
            .request_bytes_budget
            .acquire_many(u32::try_from(frame_len).unwrap_or(u32::MAX))
            .await
            .map_err(|_| CloseReason::ShuttingDown)?;
        let mut body = BytesMut::zeroed(frame_len);
        tokio::time::timeout(idle, stream.read_exact(&mut body))
            .await
            .map_err(|_| CloseReason::FrameBodyTimedOut(idle))??;
        let body: Bytes = body.freeze();
        // The frame is received: its service time starts here (Kafka's request start time).
        let received = ctx.instant();
        let outcome = match state.sasl.as_mut() {
            Some(authenticator) if authenticator.expected_token() == Some(TokenFraming::Bare) => {
                handlers::handle_bare_sasl_token(authenticator, &body)
            }
            sasl => {
                if let Some(capture) = &state.capture {
                    capture.record(&body);
                }
                handlers::handle_frame(ctx, &state.session, sasl, body).await
            }
        };
        if let Some(user) = &outcome.authenticated {
            tracing::debug!(%user, listener = %state.session.listener_name, "authenticated");
            state.session.principal = Principal::user(user.clone());
            state.sasl = None;
        }
        let answered = outcome.response.is_some();
        if let Some(parts) = outcome.response {
            write_response(stream, parts, idle).await?;
        }
        if let Some(served) = &outcome.served {
            // Written (or, with no response, handled): its latency and service time end here.
            ctx.metrics.request_done(served, received.elapsed());
        }
        if outcome.close {
            if answered {
                linger(stream).await;
            }
            return Err(CloseReason::Unanswerable);
        }
        admitted.end_request();
        mute(outcome.throttle_ms, stop, admitted).await?;
    }
}

/// The body length a size prefix announces, or why the connection closes instead.
fn frame_body_len(size_prefix: &[u8; 4], request_bytes_max: usize) -> Result<usize, CloseReason> {
    match skiff_protocol::frame::check(size_prefix, request_bytes_max) {
        FrameCheck::NeedMore {
            frame_bytes: Some(frame_bytes),
        } => Ok(frame_bytes - size_prefix.len()),
        FrameCheck::Ready { body_bytes } => Ok(body_bytes),
        FrameCheck::TooLarge { body_bytes, .. } => Err(CloseReason::FrameTooLarge {
            body_bytes,
            max_bytes: request_bytes_max,
        }),
        FrameCheck::Negative { size } => Err(CloseReason::NegativeFrameSize(size)),
        FrameCheck::NeedMore { frame_bytes: None } => Err(CloseReason::IncompleteSizePrefix),
    }
}

/// Reads nothing for `throttle_ms` after a throttled answer (KIP-219: the client was told its
/// `throttle_time_ms` and, if it does not wait by itself, waits here, old clients included).
/// Shutdown or an eviction ends the wait. Nothing to wait for when `throttle_ms` is 0.
async fn mute(
    throttle_ms: u64,
    stop: &mut watch::Receiver<bool>,
    admitted: &Admitted,
) -> Result<(), CloseReason> {
    if throttle_ms == 0 {
        return Ok(());
    }
    tokio::select! {
        biased;
        _ = stop.changed() => Err(CloseReason::ShuttingDown),
        _ = admitted.evicted() => Err(CloseReason::Evicted),
        _ = tokio::time::sleep(Duration::from_millis(throttle_ms)) => Ok(()),
    }
}

/// How long a connection closed after a final answer (a SASL failure, an unsupported mechanism)
/// waits for the client to read it and close first (Kafka delays closing a failed authentication
/// too, `connection.failed.authentication.delay.ms`).
const LINGER_MS: u64 = 1000;
/// Bytes a lingering connection reads and discards at most.
const LINGER_BYTES_MAX: usize = 64 * 1024;

/// Waits for the client to close (discarding what it still sends) up to [`LINGER_MS`], then shuts
/// our side: a client that sees the connection end in the same read as the answer may drop the
/// answer unread, and closing with unread input sends a reset that can destroy it in transit.
async fn linger<S: Transport>(stream: &mut S) {
    use tokio::io::AsyncWriteExt as _;
    let _ = tokio::time::timeout(Duration::from_millis(LINGER_MS), async {
        let mut scratch = [0u8; 4096];
        let mut discarded = 0usize;
        while discarded < LINGER_BYTES_MAX {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(count) => discarded += count,
            }
        }
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_millis(LINGER_MS), stream.shutdown()).await;
}
