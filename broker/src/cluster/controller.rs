//! The controller this broker runs when it wins the election (docs/design/cluster.md §3): the
//! control task campaigns when the image has no controller; as controller it submits
//! `skiff_cluster::controller::plan` whenever the image has caught up with its last writes, and
//! steps down as soon as its fence fails; every `leader.imbalance.check.interval.seconds`, once the
//! plan is empty, it submits `skiff_cluster::controller::rebalance` too, then bundle moves and the
//! shedding cycle ([`super::shedding`]).
//!
//! What the task does at each wake-up is [`control_step`], pure, over what it knows.
//!
//! Must never: decide leadership itself (the pure plan does), or trust a past answer about being
//! controller (every write is fenced, and a refused one is checked against the store).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_cluster::controller::{self, ControllerWrite, PlanLimits, WriteReason};
use skiff_cluster::membership::{self, Campaign};
use skiff_cluster::Key;
use skiff_meta::GetRequest;
use tokio::sync::watch;

use super::session::Session;
use super::{shedding, Cluster};

/// How often the controller re-plans even when nothing changed in the image (a write that failed
/// without an image change is retried at this pace).
const CONTROLLER_TICK: Duration = Duration::from_millis(1000);

/// What the control task knows at a wake-up.
#[derive(Debug, Clone, Copy)]
pub(super) struct ControlView {
    /// This broker.
    pub(super) node_id: i32,
    /// Its session's broker epoch (the revision of its registration).
    pub(super) broker_epoch: i64,
    /// The revision its image has reached.
    pub(super) revision: i64,
    /// The controller and its epoch, as the image names them.
    pub(super) image_controller: Option<(i32, i64)>,
    /// The epoch this broker controls at, as far as it knows.
    pub(super) our_epoch: Option<i64>,
    /// The highest revision its last writes were answered at.
    pub(super) replan_after_revision: i64,
}

/// What the control task does at a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ControlStep {
    /// Nothing now.
    Wait,
    /// Nobody controls, by the image and by this broker: run for it.
    Campaign,
    /// The image, having seen this broker's term, names another controller: this term is over.
    StepDown(i64),
    /// Plan and submit the controller's writes at this epoch.
    Plan(i64),
}

/// The control task's decision at a wake-up (pure).
pub(super) fn control_step(view: &ControlView) -> ControlStep {
    if view.revision < view.broker_epoch {
        return ControlStep::Wait; // the image has not seen our own registration yet
    }
    match (view.our_epoch, view.image_controller) {
        (None, None) => ControlStep::Campaign,
        (None, Some(_)) => ControlStep::Wait,
        (Some(epoch), current) if current != Some((view.node_id, epoch)) => {
            if view.revision >= epoch {
                ControlStep::StepDown(epoch)
            } else {
                ControlStep::Wait
            }
        }
        (Some(_), _) if view.revision < view.replan_after_revision => ControlStep::Wait,
        (Some(epoch), _) => ControlStep::Plan(epoch),
    }
}

impl Cluster {
    /// Whether this broker currently acts as the controller.
    pub fn is_controller(&self) -> bool {
        self.controller_epoch
            .lock()
            .map(|e| e.is_some())
            .unwrap_or(false)
    }

    /// The control task: campaigns when the image has no controller; as controller, plans and
    /// submits fenced writes whenever the image has caught up with its last ones, and steps
    /// down as soon as a write or the image says its term is over.
    pub(super) async fn control(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut revisions = self.image_revision.subscribe();
        let mut replan_after_revision = 0i64;
        let mut last_rebalance = crate::clock::instant();
        let mut last_shed = crate::clock::instant();
        loop {
            tokio::select! {
                _ = revisions.changed() => {}
                _ = tokio::time::sleep(CONTROLLER_TICK) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
                continue;
            };
            let (revision, image_controller) = match self.image.read() {
                Ok(image) => (image.revision(), image.controller()),
                Err(_) => return,
            };
            let view = ControlView {
                node_id: self.node_id,
                broker_epoch: session.broker_epoch,
                revision,
                image_controller,
                our_epoch: self.controller_epoch.lock().ok().and_then(|e| *e),
                replan_after_revision,
            };
            match control_step(&view) {
                ControlStep::Wait => {}
                ControlStep::Campaign => self.campaign(session).await,
                ControlStep::StepDown(epoch) => {
                    self.step_down(epoch, "the controller key is no longer ours");
                }
                ControlStep::Plan(epoch) => {
                    let Some(writes) = self.plan_writes(epoch, &mut last_rebalance, &mut last_shed)
                    else {
                        return;
                    };
                    self.submit_writes(epoch, writes, &mut replan_after_revision)
                        .await;
                }
            }
        }
    }

    /// The controller's writes now: the plan; on a settled store the leader rebalance when it
    /// is due, then bundle records and moves in progress, then a shedding cycle when due.
    /// `None` when the image is unreadable (a poisoned lock: the task ends).
    fn plan_writes(
        &self,
        epoch: i64,
        last_rebalance: &mut Instant,
        last_shed: &mut Instant,
    ) -> Option<Vec<ControllerWrite>> {
        let limits = PlanLimits {
            unclean_leader_election_default: self
                .unclean_leader_election_default
                .load(Ordering::Relaxed),
            ..PlanLimits::default()
        };
        let mut writes = controller::plan(&*self.image.read().ok()?, epoch, limits);
        if let Some((interval, percentage)) = self.rebalance {
            // Only on a settled store: elections and shrinks come first.
            if writes.is_empty() && last_rebalance.elapsed() >= interval {
                *last_rebalance = crate::clock::instant();
                let image = self.image.read().ok()?;
                writes = controller::rebalance(&image, epoch, limits, percentage);
            }
        }
        if writes.is_empty() {
            // Bundle records and moves in progress, on a settled store.
            let now_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
            writes = skiff_cluster::bundles::plan(&*self.image.read().ok()?, epoch, now_ms);
        }
        if writes.is_empty() {
            writes = self.shed_if_due(epoch, last_shed);
        }
        Some(writes)
    }

    /// Submits `writes` in order, stopping at the first store error or at a refused write
    /// after which this broker is no longer the controller; the image must reach every answered
    /// write's revision before the next plan.
    async fn submit_writes(
        &self,
        epoch: i64,
        writes: Vec<ControllerWrite>,
        replan_after_revision: &mut i64,
    ) {
        for write in writes {
            self.counters
                .controller_writes
                .fetch_add(1, Ordering::Relaxed);
            let response = match self.store.txn(write.txn).await {
                Ok(response) => response,
                Err(error) => {
                    self.store_error("controller write", &error);
                    return;
                }
            };
            *replan_after_revision = (*replan_after_revision).max(response.revision);
            if !response.succeeded {
                self.counters
                    .controller_writes_refused
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    reason = ?write.reason,
                    epoch,
                    revision = response.revision,
                    "controller write refused"
                );
                if !self.still_controller(epoch).await {
                    self.step_down(epoch, "a fenced write failed");
                    return;
                }
            } else if write.reason == WriteReason::UncleanElection {
                self.counters.unclean_leader_elections.fetch_add(
                    u64::try_from(write.partitions.len()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                tracing::warn!(
                    partitions = ?write.partitions,
                    epoch,
                    "unclean leader election: no ISR member runs, a replica outside \
                     the ISR now leads (acknowledged records it lacks are lost)"
                );
            } else {
                tracing::info!(
                    reason = ?write.reason,
                    partitions = write.partitions.len(),
                    epoch,
                    revision = response.revision,
                    "controller write"
                );
            }
        }
    }

    /// One shedding cycle when shedding is on and its interval has passed since the last: the
    /// writes that start its moves and splits.
    fn shed_if_due(&self, epoch: i64, last_shed: &mut Instant) -> Vec<ControllerWrite> {
        let Ok(mut shedding) = self.shedding.lock() else {
            return Vec::new();
        };
        let interval = Duration::from_millis(shedding.interval_ms);
        if !shedding.enabled || last_shed.elapsed() < interval {
            return Vec::new();
        }
        *last_shed = crate::clock::instant();
        let now_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
        match self.image.read() {
            Ok(image) => shedding.cycle(&image, epoch, now_ms, &self.shedding_counters),
            Err(_) => Vec::new(),
        }
    }

    /// The cluster-wide bundle map of this broker's image, with the last shedding cycle when it
    /// is the controller.
    pub(crate) fn bundles_view(&self) -> Option<shedding::BundlesView> {
        let bundles = self.with_image(shedding::bundle_views)?;
        Some(shedding::BundlesView {
            bundles,
            cycle: self.last_shedding_cycle(),
            controller: self.controller_id(),
        })
    }

    /// The last shedding cycle this broker ran as controller (empty elsewhere).
    pub(crate) fn last_shedding_cycle(&self) -> Option<shedding::LastCycle> {
        if !self.is_controller() {
            return None;
        }
        self.shedding.lock().ok().map(|s| s.last.clone())
    }

    pub(super) async fn campaign(&self, session: Session) {
        let txn = membership::campaign(
            &self.layout,
            self.node_id,
            session.broker_epoch,
            session.lease,
        );
        match self.store.txn(txn).await {
            Ok(response) => match membership::campaign_outcome(&response) {
                Ok(Campaign::Won { controller_epoch }) => {
                    self.counters
                        .controller_terms_won
                        .fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut epoch) = self.controller_epoch.lock() {
                        *epoch = Some(controller_epoch);
                    }
                    tracing::info!(controller_epoch, "became the controller");
                }
                Ok(Campaign::Lost { .. }) => {}
                Err(error) => tracing::warn!(%error, "campaign answer unreadable"),
            },
            Err(skiff_meta::Error::LeaseNotFound { .. }) => self.lose_session(),
            Err(error) => self.store_error("campaign", &error),
        }
    }

    async fn still_controller(&self, epoch: i64) -> bool {
        match self
            .store
            .get(GetRequest::key(self.layout.key(&Key::Controller)))
            .await
        {
            Ok(response) => response
                .kvs
                .first()
                .is_some_and(|kv| kv.create_revision == epoch),
            Err(error) => {
                self.store_error("controller check", &error);
                false
            }
        }
    }

    fn step_down(&self, epoch: i64, why: &str) {
        if let Ok(mut current) = self.controller_epoch.lock() {
            if *current == Some(epoch) {
                *current = None;
                tracing::warn!(
                    controller_epoch = epoch,
                    "stepped down as controller: {why}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> ControlView {
        ControlView {
            node_id: 1,
            broker_epoch: 10,
            revision: 20,
            image_controller: None,
            our_epoch: None,
            replan_after_revision: 0,
        }
    }

    #[test]
    fn nobody_controls_so_this_broker_campaigns_once_its_registration_is_seen() {
        assert_eq!(control_step(&view()), ControlStep::Campaign);
        let unseen = ControlView {
            revision: 9,
            ..view()
        };
        assert_eq!(control_step(&unseen), ControlStep::Wait);
        let another = ControlView {
            image_controller: Some((2, 15)),
            ..view()
        };
        assert_eq!(control_step(&another), ControlStep::Wait);
    }

    #[test]
    fn a_controller_plans_once_the_image_caught_up_with_its_writes() {
        let controlling = ControlView {
            image_controller: Some((1, 15)),
            our_epoch: Some(15),
            ..view()
        };
        assert_eq!(control_step(&controlling), ControlStep::Plan(15));
        let behind = ControlView {
            replan_after_revision: 21,
            ..controlling
        };
        assert_eq!(control_step(&behind), ControlStep::Wait);
    }

    #[test]
    fn a_term_the_image_saw_replaced_ends_but_one_it_has_not_seen_waits() {
        let replaced = ControlView {
            image_controller: Some((2, 18)),
            our_epoch: Some(15),
            ..view()
        };
        assert_eq!(control_step(&replaced), ControlStep::StepDown(15));
        let gone = ControlView {
            image_controller: None,
            ..replaced
        };
        assert_eq!(control_step(&gone), ControlStep::StepDown(15));
        // Won at a revision the image has not reached: its key is not in the image yet.
        let fresh = ControlView {
            image_controller: None,
            our_epoch: Some(25),
            ..view()
        };
        assert_eq!(control_step(&fresh), ControlStep::Wait);
    }
}
