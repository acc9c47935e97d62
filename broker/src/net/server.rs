//! Accepting connections on every listener: each accepted socket is admitted by
//! [`crate::net::admission`] (`max.connections` across listeners, `max.connections.per.ip`) or
//! closed at once, then served by one task, which runs the TLS handshake on SSL listeners and
//! starts the SASL exchange on SASL ones. Shutdown is a broadcast: the accept loop stops, every
//! connection finishes the response it is writing and closes, and the server waits for them up to
//! the shutdown timeout.
//!
//! Must never: stop accepting because connections are at a limit (a client left in the kernel's
//! accept queue times out: issue 14), serve a connection no limit admitted, let a TLS handshake
//! run past the authentication timeout, or exit while a connection still writes (unless the
//! shutdown timeout has passed, which it logs).

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::ListenerConfig;
use crate::config::SecurityProtocol;
use crate::context::Ctx;
use crate::net::admission::{Admissions, Admitted, ConnectionLimits, Refused};
use crate::net::connection;
use crate::net::frame_capture::FrameCapture;
use crate::security::sasl::{Authenticator, LiveCredentials, Mechanism};
use crate::security::session::{Principal, Session};

/// What SASL listeners check clients against.
pub(crate) struct SaslSetup {
    /// The credentials in force; each connection takes the set in force when it starts.
    pub(crate) store: Arc<LiveCredentials>,
    pub(crate) mechanisms: Vec<Mechanism>,
}

/// A bound listener and what its connections need.
pub(crate) struct BoundListener {
    pub(crate) listener: TcpListener,
    pub(crate) config: ListenerConfig,
    /// Host and port Metadata names for clients of this listener.
    pub(crate) advertised: (String, u16),
    /// Present on SSL and SASL_SSL listeners: the acceptor of new connections, replaced live when
    /// the listener's keystore changes.
    pub(crate) tls: Option<Arc<crate::tls::live::LiveAcceptor>>,
    /// Present on SASL_PLAINTEXT and SASL_SSL listeners.
    pub(crate) sasl: Option<Arc<SaslSetup>>,
    /// Present with `skiff.frame.capture.dir`: shared by every listener.
    pub(crate) capture: Option<Arc<FrameCapture>>,
}

/// Binds a listener at `address` whose kernel queue holds `backlog` connections not yet accepted
/// (`socket.listen.backlog.size`; a plain bind would give 128).
pub(crate) fn bind(address: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As a plain bind does on Unix: a restarted broker can bind while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(backlog)
}

/// The admission table, following the dynamic `max.connections` until shutdown.
fn following_admissions(limits: ConnectionLimits, ctx: &Ctx) -> Arc<Admissions> {
    let admissions = Admissions::new(limits);
    let follow = admissions
        .clone()
        .follow_max_connections(ctx.dynamic.subscribe(), ctx.shutdown.subscribe());
    tokio::spawn(follow);
    admissions
}

/// Serves `listeners` until `shutdown` resolves, then drains connections.
pub(crate) async fn serve(
    listeners: Vec<BoundListener>,
    ctx: Arc<Ctx>,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let listeners: Vec<Arc<BoundListener>> = listeners.into_iter().map(Arc::new).collect();
    let mut next_first = 0usize;
    let admissions = following_admissions(limits, &ctx);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (index, accepted) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = accept_listed(&listeners, &mut next_first) => accepted,
        };
        // Reap finished connection tasks so the set stays as small as the live connections.
        while connections.try_join_next().is_some() {}
        match (accepted, listeners.get(index)) {
            (Ok((stream, peer)), Some(bound)) => {
                let admitted = match admissions.admit(peer.ip()) {
                    Ok(admitted) => admitted,
                    Err(refused) => {
                        match refused {
                            Refused::PerIp { .. } => ctx.metrics.connection_refused_per_ip(),
                            Refused::Full => ctx.metrics.connection_refused_full(),
                        }
                        // Debug, not info: a flood of refusals must not flood the log too (the
                        // metrics count them).
                        tracing::debug!(%peer, listener = %bound.config.name, reason = %refused, "connection refused");
                        drop(stream);
                        continue;
                    }
                };
                if admitted.evicted {
                    ctx.metrics.connection_evicted();
                }
                let ctx = ctx.clone();
                let stop = ctx.shutdown.subscribe();
                let bound = bound.clone();
                connections.spawn(async move {
                    start_connection(stream, peer, &bound, ctx, stop, admitted).await;
                });
            }
            (Ok(_), None) => {}
            (Err(error), _) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listeners);
    ctx.shutdown.send_replace(true);
    let drain_timeout = Duration::from_millis(ctx.config.shutdown_timeout_ms);
    let drained = tokio::time::timeout(drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = connections.len(),
            "shutdown timeout passed with connections still open; aborting them"
        );
        connections.abort_all();
    }
}

/// Accepts on whichever listener has a connection waiting (scanning from a rotating start, so a
/// busy listener cannot starve the others).
async fn accept_listed(
    listeners: &[Arc<BoundListener>],
    next_first: &mut usize,
) -> (usize, std::io::Result<(TcpStream, SocketAddr)>) {
    let count = listeners.len().max(1);
    let first = *next_first % count;
    *next_first = next_first.wrapping_add(1);
    std::future::poll_fn(|cx| {
        for offset in 0..listeners.len() {
            let index = (first + offset) % count;
            if let Some(bound) = listeners.get(index) {
                if let Poll::Ready(accepted) = bound.listener.poll_accept(cx) {
                    return Poll::Ready((index, accepted));
                }
            }
        }
        Poll::Pending
    })
    .await
}

/// Applies `socket.send.buffer.bytes` and `socket.receive.buffer.bytes` (-1: leave the kernel's
/// autotuning). A refused size is logged and the connection served with the kernel's buffers.
fn set_buffer_sizes(stream: &TcpStream, config: &crate::config::Config, peer: SocketAddr) {
    let socket = socket2::SockRef::from(stream);
    // -1 (validated: the only value that is not a size) keeps the kernel's autotuning.
    if let Ok(bytes) = usize::try_from(config.socket_send_buffer_bytes) {
        let set = socket.set_send_buffer_size(bytes);
        log_refused_size(set, "socket.send.buffer.bytes", bytes, peer);
    }
    if let Ok(bytes) = usize::try_from(config.socket_receive_buffer_bytes) {
        let set = socket.set_recv_buffer_size(bytes);
        log_refused_size(set, "socket.receive.buffer.bytes", bytes, peer);
    }
}

fn log_refused_size(set: std::io::Result<()>, key: &str, bytes: usize, peer: SocketAddr) {
    if let Err(error) = set {
        tracing::warn!(%peer, key, bytes, %error, "socket buffer size not set");
    }
}

/// The session of a connection on `bound` from `peer` before any authentication.
fn anonymous_session(bound: &BoundListener, peer: SocketAddr) -> Session {
    Session {
        principal: Principal::anonymous(),
        listener_name: bound.config.name.clone(),
        security_protocol: bound.config.protocol,
        advertised_host: bound.advertised.0.clone(),
        advertised_port: bound.advertised.1,
        peer_ip: Some(peer.ip()),
    }
}

/// Runs the TLS handshake if the listener has TLS, prepares the session and the SASL exchange,
/// and serves the connection.
async fn start_connection(
    stream: TcpStream,
    peer: SocketAddr,
    bound: &BoundListener,
    ctx: Arc<Ctx>,
    stop: watch::Receiver<bool>,
    admitted: Admitted,
) {
    let _ = stream.set_nodelay(true);
    set_buffer_sizes(&stream, &ctx.config, peer);
    let authentication_timeout = Duration::from_millis(ctx.config.authentication_timeout_ms);
    let authenticated_by = crate::clock::deadline_after(authentication_timeout);
    let session = anonymous_session(bound, peer);
    let sasl = bound
        .sasl
        .as_ref()
        .map(|setup| Authenticator::new(setup.store.current(), setup.mechanisms.clone()));
    let mut setup = connection::Setup {
        peer,
        ctx,
        stop,
        session,
        sasl,
        authenticated_by,
        admitted: &admitted,
        capture: bound.capture.clone(),
    };
    let Some(acceptor) = bound.tls.as_ref().map(|live| live.acceptor()) else {
        connection::run(stream, setup).await;
        return;
    };
    // A connection still in its handshake is idle as far as admission is concerned: one that
    // stalls there may be evicted to make room.
    let handshake = tokio::select! {
        handshake = tokio::time::timeout_at(authenticated_by, acceptor.accept(stream)) => handshake,
        _ = admitted.evicted() => {
            tracing::debug!(%peer, listener = %bound.config.name, "closed during the TLS handshake to make room");
            return;
        }
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::info!(%peer, listener = %bound.config.name, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, listener = %bound.config.name, "TLS handshake timed out");
            return;
        }
    };
    if bound.config.protocol == SecurityProtocol::Ssl {
        // A verified client certificate names the principal: its subject through
        // `ssl.principal.mapping.rules` (Kafka's default principal builder).
        if let Some(subject) = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(crate::tls::certificate_principal)
        {
            let rules = &setup.ctx.config.ssl_principal_mapping_rules.mapper;
            let Some(user) = rules.map(&subject) else {
                // Kafka fails the authentication ("Failed to map name ... based on SSL principal
                // mapping rules") and closes.
                tracing::info!(%peer, listener = %bound.config.name, %subject, "no ssl.principal.mapping.rules rule applies to the client certificate's subject; closing");
                return;
            };
            setup.session.principal = Principal::user(user);
        }
    }
    connection::run(stream, setup).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn socket_buffer_sizes_are_set_when_configured_and_left_alone_at_minus_one() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let _client = TcpStream::connect(address).await.expect("connect");
        let (server, peer) = listener.accept().await.expect("accept");
        let socket = socket2::SockRef::from(&server);
        let untouched = socket.send_buffer_size().expect("size");
        set_buffer_sizes(&server, &crate::config::Config::default(), peer);
        assert_eq!(socket.send_buffer_size().expect("size"), untouched);

        let mut config = crate::config::Config::default();
        config
            .apply_override("socket.send.buffer.bytes=102400")
            .expect("send");
        config
            .apply_override("socket.receive.buffer.bytes=65536")
            .expect("receive");
        set_buffer_sizes(&server, &config, peer);
        // The kernel reports double the size set, for its own bookkeeping.
        assert_eq!(socket.send_buffer_size().expect("size"), 2 * 102_400);
        assert_eq!(socket.recv_buffer_size().expect("size"), 2 * 65_536);
    }
}
