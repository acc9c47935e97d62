//! One client connection: read a frame (size prefix checked against `socket.request.max.bytes` and
//! the broker-wide request-bytes budget before anything is allocated), handle it, write the
//! response, then read the next — one request in flight, so responses stay in order (Kafka's mute
//! rule). Idle connections are closed after `connections.max.idle.ms`.
//!
//! Must never: allocate a frame before its size is checked, or let a bad frame take down anything
//! but this connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use skiff_protocol::frame::FrameCheck;

use crate::context::Ctx;
use crate::handlers;
use crate::send::write_response;
use crate::session::Session;

/// Serves one connection until the client closes, an error, the idle timeout or shutdown.
pub(crate) async fn run(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Ctx>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    ctx.metrics.connection_opened();
    let idle = Duration::from_millis(ctx.config.connections_max_idle_ms);
    let outcome = serve(&mut stream, &ctx, &mut stop, idle).await;
    ctx.metrics.connection_closed();
    match outcome {
        Ok(()) => tracing::debug!(%peer, "connection closed"),
        Err(reason) => tracing::debug!(%peer, %reason, "connection closed"),
    }
}

async fn serve(
    stream: &mut TcpStream,
    ctx: &Ctx,
    stop: &mut watch::Receiver<bool>,
    idle: Duration,
) -> Result<(), String> {
    let session = Session::plaintext_anonymous();
    loop {
        let mut size_prefix = [0u8; 4];
        tokio::select! {
            biased;
            _ = stop.changed() => return Ok(()),
            read = tokio::time::timeout(idle, stream.read_exact(&mut size_prefix)) => match read {
                Err(_) => return Err(format!("idle for {idle:?}")),
                Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Ok(Err(error)) => return Err(error.to_string()),
                Ok(Ok(_)) => {}
            },
        }
        let request_bytes_max = ctx.config.socket_request_max_bytes as usize;
        let frame_len = match skiff_protocol::frame::check(&size_prefix, request_bytes_max) {
            FrameCheck::NeedMore {
                frame_bytes: Some(frame_bytes),
            } => frame_bytes - size_prefix.len(),
            FrameCheck::Ready { body_bytes } => body_bytes,
            FrameCheck::TooLarge { body_bytes, .. } => {
                return Err(format!(
                    "request of {body_bytes} bytes is above socket.request.max.bytes ({request_bytes_max})"
                ))
            }
            FrameCheck::Negative { size } => return Err(format!("negative frame size {size}")),
            FrameCheck::NeedMore { frame_bytes: None } => return Err("no size prefix".to_owned()),
        };
        // The broker-wide budget bounds the memory all connections' frames hold together.
        let _budget = ctx
            .request_bytes_budget
            .acquire_many(u32::try_from(frame_len).unwrap_or(u32::MAX))
            .await
            .map_err(|_| "shutting down".to_owned())?;
        let mut body = BytesMut::zeroed(frame_len);
        tokio::time::timeout(idle, stream.read_exact(&mut body))
            .await
            .map_err(|_| format!("frame body not received within {idle:?}"))?
            .map_err(|error| error.to_string())?;
        let body: Bytes = body.freeze();
        let outcome = handlers::handle_frame(ctx, &session, body).await;
        if let Some(parts) = outcome.response {
            write_response(stream, parts, idle)
                .await
                .map_err(|error| error.to_string())?;
        }
        if outcome.close {
            return Err("closed after a request that cannot be answered".to_owned());
        }
    }
}
