//! The signal that a partition's readable end advanced: what wakes the long-polling fetches
//! waiting on that partition, and only those. An append advances it (a follower reads to the log
//! end), and so does every rise of the high watermark (consumers read below it). A topic
//! deletion advances it too, so fetches parked on a vanished partition re-read at once and
//! answer an error instead of holding the partition until `max_wait_ms`.
//!
//! Waiters register before they read (register-then-check): a [`Waiter`] is enabled when it is
//! made, so an advance that lands between a fetch's read and its wait still completes it. A waiter
//! lives in the partition's own list (tokio's intrusive [`Notify`] list, no allocation in the
//! partition) and leaves it when dropped, so a finished fetch or a dropped connection leaves
//! nothing behind, and a deleted topic's bookkeeping goes with its partitions.
//!
//! Must never: wake waiters of another partition, or keep a waiter after its fetch is gone.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// One partition's "readable end advanced" signal and its waiters.
#[derive(Debug, Default)]
pub struct ReadableEnd {
    advanced: Notify,
    /// Live [`Waiter`]s, for tests and metrics: the `Notify` does not expose its list length.
    waiters: AtomicUsize,
}

impl ReadableEnd {
    /// Wakes every waiter registered on this partition (and only them). Cheap without waiters:
    /// one uncontended lock and an atomic increment.
    pub fn advance(&self) {
        self.advanced.notify_waiters();
    }

    /// Registers a waiter, enabled on return: every [`ReadableEnd::advance`] from now on completes
    /// it, even one that happens before it is first polled.
    pub fn waiter(&self) -> Waiter<'_> {
        let mut notified = Box::pin(self.advanced.notified());
        notified.as_mut().enable();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        Waiter {
            notified,
            end: self,
        }
    }

    /// Waiters registered and not yet dropped.
    pub fn waiter_count(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }
}

/// A registration on one partition's [`ReadableEnd`]; completes at the next advance after it was
/// made. Dropping it unregisters it.
pub struct Waiter<'a> {
    notified: Pin<Box<Notified<'a>>>,
    end: &'a ReadableEnd,
}

impl Future for Waiter<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        self.notified.as_mut().poll(context)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let before = self.end.waiters.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(before > 0, "waiter count underflow");
    }
}

/// Completes when any of `waiters` does (never, for none: the caller's deadline ends the wait).
pub async fn any_advanced(waiters: &mut [Waiter<'_>]) {
    std::future::poll_fn(|context| {
        // Every waiter is polled, so each one that is pending holds this task's waker.
        let mut ready = false;
        for waiter in waiters.iter_mut() {
            ready |= Pin::new(waiter).poll(context).is_ready();
        }
        if ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;
    use std::sync::Arc;
    use std::time::Duration;

    use std::task::Waker;

    /// Polls a future once with a no-op waker.
    fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let mut context = Context::from_waker(Waker::noop());
        Pin::new(future).poll(&mut context)
    }

    #[test]
    fn an_advance_wakes_only_the_waiters_of_its_partition() {
        let (a, b) = (ReadableEnd::default(), ReadableEnd::default());
        let mut on_a: Vec<Waiter<'_>> = (0..3).map(|_| a.waiter()).collect();
        let mut on_b: Vec<Waiter<'_>> = (0..3).map(|_| b.waiter()).collect();
        a.advance();
        for waiter in &mut on_a {
            assert!(poll_once(waiter).is_ready());
        }
        for waiter in &mut on_b {
            assert!(poll_once(waiter).is_pending(), "a waiter on B woke");
        }
        assert_eq!(b.waiter_count(), 3);
        b.advance();
        for waiter in &mut on_b {
            assert!(poll_once(waiter).is_ready());
        }
    }

    #[test]
    fn an_advance_before_the_first_poll_is_not_lost() {
        let end = ReadableEnd::default();
        let mut waiter = end.waiter();
        end.advance();
        assert!(poll_once(&mut waiter).is_ready());
        // A waiter made after the advance waits for the next one.
        let mut late = end.waiter();
        assert!(poll_once(&mut late).is_pending());
    }

    #[test]
    fn any_advanced_completes_on_one_of_several_partitions() {
        let (a, b, c) = (
            ReadableEnd::default(),
            ReadableEnd::default(),
            ReadableEnd::default(),
        );
        let mut waiters = vec![a.waiter(), b.waiter(), c.waiter()];
        let mut any = Box::pin(any_advanced(&mut waiters));
        assert!(poll_once(&mut any).is_pending());
        b.advance();
        assert!(poll_once(&mut any).is_ready());
        drop(any);
        let mut none: Vec<Waiter<'_>> = Vec::new();
        assert!(poll_once(&mut Box::pin(any_advanced(&mut none))).is_pending());
    }

    #[test]
    fn a_waiter_leaves_the_partition_when_dropped() {
        let end = ReadableEnd::default();
        let first = end.waiter();
        let mut second = end.waiter();
        assert_eq!(end.waiter_count(), 2);
        drop(first);
        assert_eq!(end.waiter_count(), 1);
        end.advance();
        assert!(poll_once(&mut second).is_ready());
        drop(second);
        assert_eq!(end.waiter_count(), 0);
        // Nothing left to wake: advancing an empty partition is harmless.
        end.advance();
    }

    /// The fetch's pattern against a racing appender on another thread, many times: register,
    /// read the end, wait only if nothing new. A lost wake-up would hang one round (caught by the
    /// generous timeout, which never bounds a figure).
    #[test]
    fn register_then_check_never_misses_a_racing_advance() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let end = Arc::new(ReadableEnd::default());
            let log_end = Arc::new(AtomicI64::new(0));
            for round in 1..=2_000i64 {
                let appender = {
                    let (end, log_end) = (end.clone(), log_end.clone());
                    tokio::spawn(async move {
                        log_end.store(round, Ordering::SeqCst);
                        end.advance();
                    })
                };
                let waited = tokio::time::timeout(Duration::from_secs(10), async {
                    loop {
                        let waiter = end.waiter();
                        if log_end.load(Ordering::SeqCst) >= round {
                            break;
                        }
                        waiter.await;
                    }
                })
                .await;
                assert!(waited.is_ok(), "round {round}: the advance was lost");
                appender.await.expect("appender");
            }
            assert_eq!(end.waiter_count(), 0);
        });
    }
}
