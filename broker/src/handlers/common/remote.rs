//! A request's "remote" time: how long it waited on something that is not this broker's work for
//! it, which Kafka's request metrics count apart (`RemoteTimeMs`) and the service time leaves out
//! (`crate::metrics`): a Fetch's long poll for data and an acks=all Produce's wait for its
//! followers. One [`RemoteTime`] per request, made by the dispatcher, which hands its total to
//! the connection with the outcome.
//!
//! Must never: read a clock when a request does not wait (only [`RemoteTime::wait`] reads one).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Time one request spent in remote waits, added up over all of them.
#[derive(Debug, Default)]
pub(crate) struct RemoteTime {
    /// Nanoseconds (an atomic, as the request's future must be `Send`).
    nanos: AtomicU64,
}

impl RemoteTime {
    /// Awaits `waiting`, counting its whole duration as remote time.
    pub(crate) async fn wait<F: Future>(&self, waiting: F) -> F::Output {
        let started = crate::clock::instant();
        let output = waiting.await;
        self.add(started.elapsed());
        output
    }

    fn add(&self, waited: Duration) {
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The remote time so far.
    pub(crate) fn total(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_add_up_and_work_outside_them_does_not_count() {
        let remote = RemoteTime::default();
        assert_eq!(remote.total(), Duration::ZERO);
        let answer = remote
            .wait(async {
                tokio::time::sleep(Duration::from_millis(30)).await;
                7
            })
            .await;
        assert_eq!(answer, 7);
        remote
            .wait(tokio::time::sleep(Duration::from_millis(20)))
            .await;
        let total = remote.total();
        assert!(total >= Duration::from_millis(50), "{total:?}");
        // Busy work between waits is not remote.
        let before = remote.total();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(remote.total(), before);
    }

    #[tokio::test]
    async fn a_long_poll_of_500_ms_lands_in_a_sub_millisecond_service_time_bucket() {
        // What the connection does for a Fetch that long-polled 500 ms: the frame received, the
        // wait timed as remote, the service time recorded without it.
        let metrics = crate::metrics::Metrics::default();
        let received = crate::clock::instant();
        let remote = RemoteTime::default();
        remote
            .wait(tokio::time::sleep(Duration::from_millis(500)))
            .await;
        assert!(received.elapsed() >= Duration::from_millis(500));
        let served = crate::metrics::Served {
            api_key: 1,
            bytes_in: 0,
            bytes_out: 0,
            remote: remote.total(),
        };
        metrics.request_done(&served, received.elapsed());
        let text = metrics.render_prometheus();
        let sub_ms = "skiff_request_service_time_us_bucket{api=\"Fetch\",le=\"1000\"} 1";
        assert!(text.lines().any(|l| l == sub_ms), "{text}");
    }
}
