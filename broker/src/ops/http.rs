//! The operator endpoint: a plain HTTP/1.1 listener of its own (`skiff.metrics.listener`) that
//! answers `GET /metrics` with [`Metrics::render_prometheus`] (the broker-wide families and every
//! section registered in it: cluster, placement, replication), `GET /placement/bundles` with the
//! bundles (ranges, owners, load) as JSON, `GET /` with the status page and `GET /status.json` with
//! its snapshot ([`crate::ops::status`]), and closes. Hand-written and bounded: the request line
//! and headers must fit in [`METRICS_REQUEST_BYTES_MAX`] and arrive within
//! [`METRICS_REQUEST_TIMEOUT_MS`]; one response per connection.
//!
//! Must never: read a request body, keep a connection open, or let a scrape slow the Kafka
//! listener (each scrape is its own task).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::context::Ctx;
#[cfg(doc)]
use crate::metrics::Metrics;
use crate::ops::status::{self, LoadHistory};

/// Most bytes of request line and headers read from a scraper.
pub const METRICS_REQUEST_BYTES_MAX: usize = 8 * 1024;
/// How long a scraper has to send its request and take the answer.
pub const METRICS_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Scrapes served at once; further connections wait in the kernel's accept queue.
pub const METRICS_CONNECTIONS_MAX: usize = 16;

/// Serves scrapes, and samples the status page's load ring, until the task is dropped.
pub(crate) async fn serve(listener: TcpListener, ctx: Arc<Ctx>) {
    let history = Arc::new(std::sync::Mutex::new(LoadHistory::default()));
    tokio::select! {
        () = accept(listener, ctx.clone(), history.clone()) => {}
        () = status::sample_loads(&ctx, &history) => {}
    }
}

async fn accept(listener: TcpListener, ctx: Arc<Ctx>, history: Arc<std::sync::Mutex<LoadHistory>>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(METRICS_CONNECTIONS_MAX));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let ctx = ctx.clone();
                let history = history.clone();
                tokio::spawn(async move {
                    let timeout = Duration::from_millis(METRICS_REQUEST_TIMEOUT_MS);
                    let answered = answer(stream, &ctx, &history);
                    if let Err(error) = tokio::time::timeout(timeout, answered)
                        .await
                        .map_err(|_| "timed out".to_owned())
                        .and_then(|result| result.map_err(|error| error.to_string()))
                    {
                        tracing::debug!(%error, "metrics scrape failed");
                    }
                    drop(permit);
                });
            }
            Err(error) => {
                tracing::warn!(%error, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Bundles,
    StatusPage,
    StatusJson,
    NotFound,
    BadRequest,
}

/// Routes a complete request head (request line and headers).
fn route(head: &[u8]) -> Route {
    let Some(line) = head.split(|byte| *byte == b'\n').next() else {
        return Route::BadRequest;
    };
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(path), Some(version)) if version.starts_with("HTTP/1.") => {
            if path == "/metrics" || path.starts_with("/metrics?") {
                Route::Metrics
            } else if path == "/placement/bundles" {
                Route::Bundles
            } else if path == "/" || path == "/index.html" {
                Route::StatusPage
            } else if path == "/status.json" {
                Route::StatusJson
            } else {
                Route::NotFound
            }
        }
        _ => Route::BadRequest,
    }
}

/// The cluster-wide bundle map: the controller's records with owners' traffic, and the last
/// shedding cycle on the controller.
fn bundles_json(ctx: &Ctx) -> Option<String> {
    serde_json::to_string(&ctx.cluster.bundles_view()?).ok()
}

async fn answer(
    mut stream: TcpStream,
    ctx: &Ctx,
    history: &std::sync::Mutex<LoadHistory>,
) -> std::io::Result<()> {
    let mut head = vec![0u8; METRICS_REQUEST_BYTES_MAX];
    let mut filled = 0;
    let complete = loop {
        // `filled` never passes the buffer's end: a read fills at most what is left of it.
        let Some((received, unfilled)) = head.split_at_mut_checked(filled) else {
            break false;
        };
        if received.windows(4).any(|window| window == b"\r\n\r\n") {
            break true;
        }
        if unfilled.is_empty() {
            break false;
        }
        let read = stream.read(unfilled).await?;
        if read == 0 {
            break false;
        }
        filled += read;
    };
    head.truncate(filled);
    const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";
    let (status, content_type, body) = if !complete {
        (
            "431 Request Header Fields Too Large",
            PROMETHEUS_TEXT,
            String::new(),
        )
    } else {
        match route(&head) {
            Route::Metrics => ("200 OK", PROMETHEUS_TEXT, ctx.metrics.render_prometheus()),
            Route::StatusPage => (
                "200 OK",
                "text/html; charset=utf-8",
                status::STATUS_PAGE_HTML.to_owned(),
            ),
            Route::StatusJson => (
                "200 OK",
                "application/json",
                status::snapshot(ctx, &ctx.metrics.render_prometheus(), history).to_string(),
            ),
            Route::Bundles => match bundles_json(ctx) {
                Some(json) => ("200 OK", "application/json", json),
                None => ("500 Internal Server Error", PROMETHEUS_TEXT, String::new()),
            },
            Route::NotFound => ("404 Not Found", PROMETHEUS_TEXT, String::new()),
            Route::BadRequest => ("400 Bad Request", PROMETHEUS_TEXT, String::new()),
        }
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_only_get_metrics() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::StatusPage);
        assert_eq!(
            route(b"GET /status.json HTTP/1.1\r\n\r\n"),
            Route::StatusJson
        );
        assert_eq!(route(b"GET /nothing HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"\xff\xfe\r\n\r\n"), Route::BadRequest);
    }
}
