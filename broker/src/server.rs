//! Accepting connections: a permit from the connection semaphore first (so `max.connections` holds
//! before a socket is even accepted), then one task per connection. Shutdown is a broadcast: the
//! accept loop stops, every connection finishes the response it is writing and closes, and the
//! server waits for them up to the shutdown timeout.
//!
//! Must never: accept without a permit, or exit while a connection still writes (unless the
//! shutdown timeout has passed, which it logs).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::connection;
use crate::context::Ctx;

/// Serves `listener` until `shutdown` resolves, then drains connections.
pub(crate) async fn serve(
    listener: TcpListener,
    ctx: Arc<Ctx>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let connection_permits = Arc::new(Semaphore::new(ctx.config.max_connections));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = connection_permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        // Reap finished connection tasks so the set stays as small as the live connections.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer)) => {
                let ctx = ctx.clone();
                let stop = ctx.shutdown.subscribe();
                connections.spawn(async move {
                    connection::run(stream, peer, ctx, stop).await;
                    drop(permit);
                });
            }
            Err(error) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
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
