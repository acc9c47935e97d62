//! This broker's session and registration in the metadata store (docs/design/cluster.md §2), and
//! its image of the store: the session lease kept alive every third of `broker.session.timeout.ms`
//! and registered again under a new lease (a new broker epoch) when the store says it is gone; the
//! watch that keeps the image, resumed from the last revision after a broken stream and re-read
//! after a compaction; the fence that says whether this broker may lead now; and what rides on the
//! session: producer-id blocks, load reports, controlled shutdown and leaving.
//!
//! Must never: lead on a session it cannot prove alive (the fence decides), or decide anything
//! a registration outcome does not (`skiff_cluster::membership` does).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use skiff_cluster::controller;
use skiff_cluster::membership::{self, Registration};
use skiff_cluster::records::{BrokerRegistration, BrokerState};
use skiff_cluster::{ClusterImage, Key};
use skiff_meta::{GetRequest, KeyRange, LeaseId};
use tokio::sync::watch;

use super::{is_retriable, Cluster, ClusterError, RETRY_BACKOFF};

/// What the session task knows of the current registration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Session {
    pub(super) lease: LeaseId,
    pub(super) broker_epoch: i64,
}

/// Why a controlled shutdown did not wait for the leaderships to move.
#[derive(Debug, thiserror::Error)]
enum HandOverSkipped {
    /// This broker has no session to write the `shutting_down` registration on.
    #[error("no session")]
    NoSession,
    /// The registration's guard failed: another session owns it now.
    #[error("the registration is no longer this session's")]
    NotOurs,
    /// The image stopped following the store.
    #[error("the image is no longer followed")]
    ImageNotFollowed,
    /// The `shutting_down` registration could not be written: the store is unreachable.
    #[error("the metadata store is unreachable")]
    StoreUnavailable,
}

impl Cluster {
    /// Whether this broker's session is provably alive now, so it may accept writes as a leader
    /// (`skiff_cluster::session`).
    pub fn may_lead(&self) -> bool {
        let revision = self.image.read().map(|image| image.revision()).unwrap_or(0);
        self.may_lead_at(revision)
    }

    /// [`Self::may_lead`] for an image at `revision` the caller already holds.
    pub(super) fn may_lead_at(&self, revision: i64) -> bool {
        self.fence
            .lock()
            .map(|fence| fence.may_lead(self.mono_ms(), revision))
            .unwrap_or(false)
    }

    pub(super) fn reload(&self, snapshot: &skiff_meta::GetResponse) {
        let revision = {
            let Ok(mut image) = self.image.write() else {
                return;
            };
            image.reload(snapshot);
            self.report_undecodable(&image);
            image.revision()
        };
        self.image_revision.send_replace(revision);
    }

    fn report_undecodable(&self, image: &ClusterImage) {
        for (key, error) in image.undecodable() {
            tracing::warn!(%key, %error, "metadata key ignored: its value does not decode");
        }
    }

    /// Grants a lease and registers under it. At start (`deadline` given) an unreachable store is
    /// retried until the deadline; later, until it works or the broker shuts down.
    pub(super) async fn register(
        &self,
        deadline: Option<(std::time::Instant, u64)>,
    ) -> Result<(), ClusterError> {
        loop {
            if let Some((deadline, timeout_ms)) = deadline {
                if crate::clock::instant() >= deadline {
                    return Err(ClusterError::Unreachable {
                        address: self.address.to_string(),
                        waited_ms: timeout_ms,
                        last_error: "registration did not complete".into(),
                    });
                }
            }
            let sent_ms = self.mono_ms();
            let lease = match self.store.lease_grant(self.ttl_secs).await {
                Ok(lease) => lease,
                Err(error) => {
                    self.store_error("lease grant", &error);
                    if !is_retriable(&error) && deadline.is_some() {
                        return Err(self.fatal(error));
                    }
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            };
            if let Ok(mut fence) = self.fence.lock() {
                fence.on_lease_granted(sent_ms, lease.ttl_secs);
            }
            let registration = self.registration_now();
            let txn = membership::register(&self.layout, &registration, lease.id);
            let response = match self.store.txn(txn).await {
                Ok(response) => response,
                Err(error) => {
                    self.store_error("registration", &error);
                    let _ = self.store.lease_revoke(lease.id).await;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            };
            match membership::registration_outcome(&registration, &response)? {
                Registration::Registered { broker_epoch } => {
                    if let Ok(mut fence) = self.fence.lock() {
                        fence.on_registered(broker_epoch);
                    }
                    if let Ok(mut session) = self.session.lock() {
                        *session = Some(Session {
                            lease: lease.id,
                            broker_epoch,
                        });
                    }
                    tracing::info!(broker_epoch, lease = lease.id, "registered");
                    return Ok(());
                }
                Registration::StaleOwnRegistration { lease: old } => {
                    // An earlier process on this data directory (killed, so its lease lives on):
                    // end its session now rather than wait out its TTL.
                    tracing::info!(
                        old_lease = old,
                        "replacing this directory's stale registration"
                    );
                    let _ = self.store.lease_revoke(old).await;
                    let _ = self.store.lease_revoke(lease.id).await;
                }
                Registration::Retry => {
                    let _ = self.store.lease_revoke(lease.id).await;
                }
            }
        }
    }

    /// The registration this broker writes now: `shutting_down` once a controlled shutdown began.
    fn registration_now(&self) -> BrokerRegistration {
        let mut registration = self.registration.clone();
        if self.shutting_down.load(Ordering::Relaxed) {
            registration.state = BrokerState::ShuttingDown;
        }
        registration
    }

    pub(super) fn lose_session(&self) {
        self.counters.sessions_lost.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut fence) = self.fence.lock() {
            fence.on_session_lost();
        }
        if let Ok(mut session) = self.session.lock() {
            *session = None;
        }
        // A controller whose session ended is no longer one (its key died with the lease); said
        // here as well as by the controller loop, whichever notices first.
        if let Ok(mut epoch) = self.controller_epoch.lock() {
            if let Some(lost) = epoch.take() {
                tracing::warn!(
                    controller_epoch = lost,
                    "stepped down as controller: its session was lost"
                );
            }
        }
    }

    pub(super) async fn keep_session(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let interval = Duration::from_millis(u64::try_from(self.ttl_secs).unwrap_or(1) * 1000 / 3);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
                if let Err(error) = self.register(None).await {
                    tracing::error!(%error, "cannot register again");
                }
                continue;
            };
            let sent_ms = self.mono_ms();
            match self.store.lease_keep_alive(session.lease).await {
                Ok(_) => {
                    if let Ok(mut fence) = self.fence.lock() {
                        fence.on_keep_alive_acknowledged(sent_ms);
                    }
                }
                Err(skiff_meta::Error::LeaseNotFound { .. }) => {
                    tracing::warn!(
                        broker_epoch = session.broker_epoch,
                        "session lost (lease expired): not leading anything until registered again"
                    );
                    self.lose_session();
                    if let Err(error) = self.register(None).await {
                        tracing::error!(%error, "cannot register again");
                    }
                }
                // The fence lapses on its own if this goes on; keep trying.
                Err(error) => self.store_error("keep-alive", &error),
            }
        }
    }

    pub(super) async fn follow(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            let from = self.image.read().map(|i| i.revision()).unwrap_or(0) + 1;
            let watched = self
                .store
                .watch(KeyRange::prefix(self.layout.root()), from)
                .await;
            let mut watcher = match watched {
                Ok(watcher) => watcher,
                Err(error) => {
                    self.store_error("watch", &error);
                    self.resync_or_wait(&error, &mut shutdown).await;
                    if *shutdown.borrow() {
                        return;
                    }
                    continue;
                }
            };
            loop {
                let next = tokio::select! {
                    next = watcher.next() => next,
                    _ = shutdown.changed() => return,
                };
                match next {
                    Ok(batch) => {
                        let revision = {
                            let Ok(mut image) = self.image.write() else {
                                return;
                            };
                            let changed = image.apply(&batch);
                            if changed
                                .iter()
                                .any(|key| image.undecodable().contains_key(key))
                            {
                                self.report_undecodable(&image);
                            }
                            image.revision()
                        };
                        self.image_revision.send_replace(revision);
                    }
                    Err(error) => {
                        self.counters.watch_resumes.fetch_add(1, Ordering::Relaxed);
                        self.store_error("watch stream", &error);
                        self.resync_or_wait(&error, &mut shutdown).await;
                        break;
                    }
                }
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }

    /// After a watch error: re-GET the whole image when the history was compacted, otherwise
    /// wait a moment and let the caller resume from the last revision.
    async fn resync_or_wait(
        &self,
        error: &skiff_meta::Error,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        if matches!(error, skiff_meta::Error::Compacted { .. }) {
            match self.store.get(GetRequest::prefix(self.layout.root())).await {
                Ok(snapshot) => {
                    self.reload(&snapshot);
                    return;
                }
                Err(error) => self.store_error("re-GET after compaction", &error),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY_BACKOFF) => {}
            _ = shutdown.changed() => {}
        }
    }

    /// Claims a block of producer ids starting at `at_least` or above, unique across the cluster
    /// (compare-and-set on `R/ids/producer_id_block`, re-read and retried when another broker
    /// raced it). Durable in the store before it returns.
    pub async fn claim_producer_id_block(
        &self,
        at_least: i64,
    ) -> Result<(i64, i64), skiff_meta::Error> {
        const ATTEMPTS_MAX: usize = 16;
        let key = self.layout.key(&Key::ProducerIdBlock);
        let mut last = None;
        for _ in 0..ATTEMPTS_MAX {
            let current = self.store.get(GetRequest::key(key.clone())).await?;
            let seen = membership::producer_id_block_of(current.kvs.first())
                .map_err(|error| skiff_meta::Error::InvalidArgument(error.to_string()))?;
            let (txn, block) =
                membership::claim_producer_id_block(&self.layout, seen.as_ref(), at_least);
            let response = self.store.txn(txn).await?;
            if response.succeeded {
                return Ok(block);
            }
            last = Some(block);
        }
        Err(skiff_meta::Error::Unavailable {
            reason: format!(
                "the producer-id block key kept changing under {ATTEMPTS_MAX} claims (last try {last:?})"
            ),
        })
    }

    /// Writes this broker's load report (placement's figures and its traffic over the last
    /// sampling interval) to `R/load/<id>` on its session lease when
    /// `skiff_cluster::load::report_due` says so (or when the lease changed since the last one:
    /// the old key died with the old lease).
    pub async fn publish_load(
        &self,
        report: skiff_placement::LoadReport,
        traffic: skiff_cluster::records::TrafficRecord,
        now_ms: u64,
    ) {
        let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
            return;
        };
        let record = skiff_cluster::records::LoadRecord {
            report,
            write_capacity_bytes_per_second: 0,
            sample_ms: now_ms,
            traffic,
        };
        let last = self.last_load.lock().ok().and_then(|last| last.clone());
        let last_record = last
            .as_ref()
            .filter(|(_, lease)| *lease == session.lease)
            .map(|(record, _)| record);
        if !skiff_cluster::load::report_due(last_record, &record) {
            return;
        }
        let txn =
            skiff_cluster::load::put_report(&self.layout, self.node_id, &record, session.lease);
        match self.store.txn(txn).await {
            Ok(_) => {
                if let Ok(mut last) = self.last_load.lock() {
                    *last = Some((record, session.lease));
                }
            }
            Err(error) => self.store_error("load report", &error),
        }
    }

    /// Controlled shutdown (docs/design/cluster.md §3): marks this broker's registration
    /// `shutting_down` (a Txn guarded on its own session), then waits until its image shows it
    /// leads no partition another running ISR member could lead (the controller moves them, at
    /// epoch + 1) or `timeout` passes. The broker keeps serving meanwhile. Returns at once when no
    /// other broker runs (a cluster of one: nothing can move), and as soon as that write fails
    /// (the store unreachable: its client has retried it already, and nothing can move without
    /// the store). Never fails: a shutdown goes on regardless.
    pub async fn controlled_shutdown(&self, timeout: Duration) {
        let started = crate::clock::instant();
        let alone = self
            .with_image(|image| {
                !image
                    .brokers()
                    .keys()
                    .any(|id| *id != self.node_id && image.is_running(*id))
            })
            .unwrap_or(true);
        if alone {
            return;
        }
        let outcome = tokio::time::timeout(timeout, self.hand_over_leaderships()).await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match outcome {
            Ok(Ok(())) => tracing::info!(elapsed_ms, "controlled shutdown: leads nothing movable"),
            Ok(Err(why)) => tracing::warn!(elapsed_ms, "controlled shutdown skipped: {why}"),
            Err(_) => {
                let left = self
                    .with_image(|image| controller::movable_leaderships(image, self.node_id))
                    .unwrap_or_default();
                tracing::warn!(
                    elapsed_ms,
                    partitions = ?left,
                    "controlled shutdown timed out (skiff.controlled.shutdown.timeout.ms) with \
                     leaderships left; they fail over when the session ends"
                );
            }
        }
    }

    async fn hand_over_leaderships(&self) -> Result<(), HandOverSkipped> {
        let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
            return Err(HandOverSkipped::NoSession);
        };
        self.shutting_down.store(true, Ordering::Relaxed);
        let txn = membership::begin_controlled_shutdown(
            &self.layout,
            &self.registration_now(),
            session.lease,
            session.broker_epoch,
        );
        let written_at = match self.store.txn(txn).await {
            Ok(response) if response.succeeded => response.revision,
            Ok(_) => return Err(HandOverSkipped::NotOurs),
            // The store's client already retried this guarded write for its retry timeout; the
            // controller moves leaderships through the same store, so nothing can move now.
            // Trying again until `skiff.controlled.shutdown.timeout.ms` only delayed the exit.
            Err(error) => {
                self.store_error("controlled shutdown", &error);
                return Err(HandOverSkipped::StoreUnavailable);
            }
        };
        let mut revisions = self.image_revision.subscribe();
        loop {
            let done = self
                .with_image(|image| {
                    image.revision() >= written_at
                        && controller::movable_leaderships(image, self.node_id).is_empty()
                })
                .unwrap_or(true);
            if done {
                return Ok(());
            }
            if revisions.changed().await.is_err() {
                return Err(HandOverSkipped::ImageNotFollowed);
            }
        }
    }

    /// Ends the session at a clean shutdown: the registration (and the controller key, if held)
    /// go at once instead of after the session timeout.
    pub async fn leave(&self) {
        let session = self.session.lock().ok().and_then(|mut s| s.take());
        if let Some(session) = session {
            if let Err(error) = self.store.lease_revoke(session.lease).await {
                self.store_error("leaving (lease revoke)", &error);
            }
        }
    }
}
